import CTickgateShim
import Glibc
import TickgateCore

/// Helpers shared by the exported functions: checking what comes in from C,
/// and turning errors into a status plus the thread's error message.
enum Boundary {
    /// Runs `body`; maps a thrown error to its status and records its message.
    static func call(_ body: () throws(TickgateError) -> Void) -> tg_status {
        do {
            try body()
            return TG_OK
        } catch {
            return fail(error)
        }
    }

    /// `call` with the engine behind `handle` held while `body` runs.
    @inline(__always)
    static func call(_ handle: OpaquePointer?,
                     _ body: (Engine) throws(TickgateError) -> Void) -> tg_status {
        do {
            try Handles.with(handle, body)
            return TG_OK
        } catch {
            return fail(error)
        }
    }

    /// Records the thread's last error, its message and beside it the kind
    /// of its store failure (`tg_last_error_message`,
    /// `tg_last_store_failure`), and returns its status.
    static func fail(_ error: TickgateError) -> tg_status {
        error.message.withCString { tgshim_error_set($0, error.storeFailure.rawValue) }
        return tg_status(rawValue: UInt32(bitPattern: error.status.rawValue))
    }

    /// A scope or subject from C: at most TG_KEY_MAX_BYTES bytes are read.
    static func name(_ text: UnsafePointer<CChar>?, _ role: String) throws(TickgateError) -> KeyName {
        guard let text else { throw TickgateError(.invalidKey, "\(role) is NULL") }
        let count = strnlen(text, Limits.maximumKeyBytes + 1)
        let bytes = UnsafeBufferPointer(
            start: UnsafeRawPointer(text).assumingMemoryBound(to: UInt8.self), count: count)
        return try KeyName(bytes: bytes, role: role)
    }

    /// A scope or subject from C, checked but not copied (valid for the
    /// call only).
    @inline(__always)
    static func bytes(_ text: UnsafePointer<CChar>?, _ role: String) throws(TickgateError) -> UnsafeRawBufferPointer {
        guard let text else { throw TickgateError(.invalidKey, "\(role) is NULL") }
        let count = strnlen(text, Limits.maximumKeyBytes + 1)
        let bytes = UnsafeBufferPointer(
            start: UnsafeRawPointer(text).assumingMemoryBound(to: UInt8.self), count: count)
        // Short ASCII (phone numbers, most e-mail addresses) is valid as it
        // is; anything else gets the full check and its message.
        if count == 0 || count > 32 || !UTF8Check.isShortASCII(bytes) {
            try KeyName.validate(bytes, role: role)
        }
        return UnsafeRawBufferPointer(bytes)
    }

    /// A key from C as the caller's bytes, for the engine's fast paths.
    @inline(__always)
    static func rawKey(_ scope: UnsafePointer<CChar>?,
                       _ subject: UnsafePointer<CChar>?) throws(TickgateError) -> RawKey {
        RawKey(scope: try bytes(scope, "scope"), subject: try bytes(subject, "subject"))
    }

    static func key(_ scope: UnsafePointer<CChar>?,
                    _ subject: UnsafePointer<CChar>?) throws(TickgateError) -> CountdownKey {
        CountdownKey(scope: try name(scope, "scope"), subject: try name(subject, "subject"))
    }

    // The limits of tickgate.h in milliseconds (its INT64_C macros do not
    // import into Swift; the C harness checks both edges of each).
    static var maximumDurationMilliseconds: Int64 { Limits.maximumDuration.nanoseconds / 1_000_000 }
    static var minimumTickMilliseconds: Int64 { Limits.minimumTickInterval.nanoseconds / 1_000_000 }
    static var maximumTickMilliseconds: Int64 { Limits.maximumTickInterval.nanoseconds / 1_000_000 }

    /// A duration in milliseconds, checked before it is scaled to a span.
    static func duration(_ milliseconds: Int64) throws(TickgateError) -> Span {
        guard milliseconds >= 1, milliseconds <= maximumDurationMilliseconds else {
            throw TickgateError(.invalidDuration,
                "duration \(milliseconds) ms is outside 1 ... \(maximumDurationMilliseconds) ms")
        }
        return .milliseconds(milliseconds)
    }

    /// A tick interval in milliseconds; 0 means the engine's default (nil).
    static func tickInterval(_ milliseconds: Int64) throws(TickgateError) -> Span? {
        if milliseconds == 0 { return nil }
        guard milliseconds >= minimumTickMilliseconds, milliseconds <= maximumTickMilliseconds else {
            throw TickgateError(.invalidDuration,
                "tick interval \(milliseconds) ms is outside \(minimumTickMilliseconds) ... \(maximumTickMilliseconds) ms")
        }
        return .milliseconds(milliseconds)
    }

    static func required<T>(_ pointer: T?, _ role: String) throws(TickgateError) -> T {
        guard let pointer else { throw TickgateError(.invalidArgument, "\(role) is NULL") }
        return pointer
    }

    /// Static text as a C string.
    static func cString(_ text: StaticString) -> UnsafePointer<CChar> {
        UnsafeRawPointer(text.utf8Start).assumingMemoryBound(to: CChar.self)
    }
}
