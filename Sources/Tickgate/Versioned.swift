import CTickgateShim
import Glibc
import TickgateCore

/// The one struct_size rule of tickgate.h ("Versioned structs" in its
/// conventions), written once for every struct that crosses the boundary:
///
/// - a declared size is one of the struct's layouts (the older ones listed
///   by the caller, whose missing fields take their defaults) or at least
///   this library's, up to `TG_STRUCT_SIZE_MAX`; anything else is refused
///   with `TG_E_VERSION`;
/// - a struct the caller fills in may be larger (a later header) only if the
///   bytes past this library's fields are zero;
/// - a struct the library fills out gets the library's fields and zeros up
///   to the caller's size, its struct_size left as the caller set it;
/// - an initialiser writes exactly the caller's size.
enum Versioned {
    static var largest: Int { Int(TG_STRUCT_SIZE_MAX) }

    /// Checks a caller's declared size for a `T`: this library's size or
    /// larger, or the size of one of `olderLayouts`.
    static func check<T>(_ declared: Int, _ type: T.Type, olderLayouts: [Int] = [],
                         _ role: String) throws(TickgateError) {
        // C's sizeof, tail padding included.
        let size = MemoryLayout<T>.stride
        if olderLayouts.contains(declared) { return }
        guard declared >= size else {
            let accepted = (olderLayouts + [size]).map(String.init).joined(separator: ", ")
            throw TickgateError(.version,
                "\(role).struct_size is \(declared); this library (\(String(cString: tgshim_version_string()))) takes \(accepted) or more")
        }
        guard declared <= largest else {
            throw TickgateError(.version, "\(role).struct_size \(declared) is larger than TG_STRUCT_SIZE_MAX (\(largest))")
        }
    }

    /// The struct_size a caller wrote at the start of its struct.
    private static func declared(_ pointer: UnsafeRawPointer) -> Int {
        Int(pointer.load(as: UInt32.self))
    }

    /// A struct the caller filled in, after the size check: an older
    /// layout's bytes over `defaults`, or (for this layout or a later one)
    /// the struct, once no field this library does not know is set.
    static func read<T>(_ pointer: UnsafePointer<T>, defaults: T, olderLayouts: [Int] = [],
                        _ role: String) throws(TickgateError) -> T {
        let bytes = UnsafeRawPointer(pointer)
        let declared = declared(bytes)
        // C's sizeof: the tail padding may hold anything.
        let size = MemoryLayout<T>.stride
        try check(declared, T.self, olderLayouts: olderLayouts, role)
        // Every byte of the caller's is read with libc's memcpy and memcmp,
        // which AddressSanitizer checks against the caller's allocation
        // (the standard library's copies are not instrumented).
        var value = defaults
        guard declared >= size else {
            withUnsafeMutableBytes(of: &value) { target in _ = memcpy(target.baseAddress!, bytes, min(declared, target.count)) }
            return value
        }
        if declared > size, zeros.withUnsafeBytes({ memcmp(bytes + size, $0.baseAddress!, declared - size) }) != 0 {
            for offset in size..<declared where bytes.load(fromByteOffset: offset, as: UInt8.self) != 0 {
                throw TickgateError(.version,
                    "\(role) sets a field this library version (\(String(cString: tgshim_version_string()))) does not know, at byte \(offset)")
            }
        }
        withUnsafeMutableBytes(of: &value) { target in _ = memcpy(target.baseAddress!, bytes, target.count) }
        return value
    }

    /// TG_STRUCT_SIZE_MAX zero bytes: what a later layout's tail is
    /// compared with.
    private static let zeros = [UInt8](repeating: 0, count: Int(TG_STRUCT_SIZE_MAX))

    /// Fills a struct the caller hands out: `value`'s fields, zeros up to
    /// the caller's size, struct_size as the caller set it.
    static func write<T>(_ value: T, to pointer: UnsafeMutablePointer<T>, olderLayouts: [Int] = [],
                         _ role: String) throws(TickgateError) {
        let declared = declared(UnsafeRawPointer(pointer))
        try check(declared, T.self, olderLayouts: olderLayouts, role)
        fill(UnsafeMutableRawPointer(pointer), declared, with: value)
    }

    /// An initialiser: `defaults` with struct_size = `declared`, cut to an
    /// older layout or with zeros past this library's fields; exactly
    /// `declared` bytes are written, and none if the size is refused.
    static func initialise<T>(_ pointer: UnsafeMutablePointer<T>?, _ declared: Int, to defaults: T,
                              olderLayouts: [Int] = [], _ role: String) throws(TickgateError) {
        let pointer = try Boundary.required(pointer, role)
        try check(declared, T.self, olderLayouts: olderLayouts, "\(role) (struct_size argument)")
        fill(UnsafeMutableRawPointer(pointer), declared, with: defaults)
    }

    /// Writes with libc's memcpy and memset, which AddressSanitizer checks
    /// against the caller's allocation (the standard library's copies and
    /// fills are not instrumented: a struct_size larger than the struct
    /// went unseen in the fuzzer).
    private static func fill<T>(_ target: UnsafeMutableRawPointer, _ declared: Int, with value: T) {
        let size = MemoryLayout<T>.size
        var copy = value
        withUnsafeMutableBytes(of: &copy) { bytes in
            bytes.storeBytes(of: UInt32(truncatingIfNeeded: declared), as: UInt32.self)
            _ = memcpy(target, bytes.baseAddress!, min(size, declared))
        }
        if declared > size { memset(target + size, 0, declared - size) }
    }
}
