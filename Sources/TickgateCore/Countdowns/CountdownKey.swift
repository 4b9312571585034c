import Glibc

/// The identity of a countdown: a scope (a business scenario such as
/// "login") and a subject (a phone number, an e-mail address).
public struct CountdownKey: Hashable, Comparable, Sendable {
    public let scope: KeyName
    public let subject: KeyName

    public init(scope: KeyName, subject: KeyName) {
        self.scope = scope
        self.subject = subject
    }

    public static func < (a: CountdownKey, b: CountdownKey) -> Bool {
        a.scope != b.scope ? a.scope < b.scope : a.subject < b.subject
    }

    /// "scope/subject", for messages.
    public var description: String { "\(scope.value)/\(subject.value)" }

    /// The dictionaries' hash (send records, local keys, key observers):
    /// the two names' digests mixed once, instead of feeding both to a
    /// SipHash `Hasher` on every lookup.
    public func _rawHashValue(seed: Int) -> Int {
        Int(truncatingIfNeeded: ByteHash.mix(
            UInt64(UInt(bitPattern: scope.digest)) ^ UInt64(UInt(bitPattern: seed)),
            UInt64(UInt(bitPattern: subject.digest)) ^ KeyName.mixer))
    }

    /// Calls `body` with the scope's and the subject's UTF-8 bytes.
    func withBytes<T>(_ body: (UnsafeRawBufferPointer, UnsafeRawBufferPointer) -> T) -> T {
        // Names are native strings: their bytes are read in place, with no
        // copy of either string (`withUTF8` would need a mutable copy).
        let inPlace = scope.value.utf8.withContiguousStorageIfAvailable { s in
            subject.value.utf8.withContiguousStorageIfAvailable { t in
                body(UnsafeRawBufferPointer(s), UnsafeRawBufferPointer(t))
            }
        }
        if let inPlace, let result = inPlace { return result }
        var scopeText = scope.value
        var subjectText = subject.value
        return scopeText.withUTF8 { s in
            subjectText.withUTF8 { t in body(UnsafeRawBufferPointer(s), UnsafeRawBufferPointer(t)) }
        }
    }
}

/// A scope, subject or realm that passed validation: 1 to
/// `Limits.maximumKeyBytes` bytes of valid UTF-8. Names compare as bytes,
/// as they do in C: "é" (U+00E9) and "e" + U+0301 are different names,
/// although Swift's `String` would call them equal.
public struct KeyName: Hashable, Comparable, Sendable {
    public let value: String
    /// A hash of the bytes, computed once: keys are hashed and compared on
    /// every call, names are made once per call.
    fileprivate let digest: Int

    /// The digests' seed, drawn once per process (a host cannot pick names
    /// that collide without knowing it), and the constant that mixes a
    /// digest into a dictionary's hash.
    private static let seed = UInt64.random(in: 1 ... .max)
    fileprivate static let mixer: UInt64 = 0x9e37_79b9_7f4a_7c15

    /// Validates raw bytes; `role` ("scope", "subject") names the field in the
    /// error message.
    public init(bytes: UnsafeBufferPointer<UInt8>, role: String) throws(TickgateError) {
        try KeyName.validate(bytes, role: role)
        value = String(decoding: bytes, as: UTF8.self)
        digest = KeyName.digest(of: UnsafeRawBufferPointer(bytes))
    }

    /// Bytes that passed `validate` (or came from a name that did).
    init(validated bytes: UnsafeRawBufferPointer) {
        value = String(decoding: bytes, as: UTF8.self)
        digest = KeyName.digest(of: bytes)
    }

    /// Checks raw bytes without making a name: 1 to
    /// `Limits.maximumKeyBytes` bytes of valid UTF-8.
    public static func validate(_ bytes: UnsafeBufferPointer<UInt8>, role: String) throws(TickgateError) {
        if bytes.isEmpty {
            throw TickgateError(.invalidKey, "\(role) is empty")
        }
        if bytes.count > Limits.maximumKeyBytes {
            throw TickgateError(.invalidKey, "\(role) is longer than \(Limits.maximumKeyBytes) bytes")
        }
        guard UTF8Check.isValid(bytes) else {
            throw TickgateError(.invalidKey, "\(role) is not valid UTF-8")
        }
    }

    /// Validates a Swift string (already valid Unicode) for length.
    public init(_ text: String, role: String = "name") throws(TickgateError) {
        let count = text.utf8.count
        if count == 0 { throw TickgateError(.invalidKey, "\(role) is empty") }
        if count > Limits.maximumKeyBytes {
            throw TickgateError(.invalidKey, "\(role) is longer than \(Limits.maximumKeyBytes) bytes")
        }
        var copy = text
        digest = copy.withUTF8 { KeyName.digest(of: UnsafeRawBufferPointer($0)) }
        value = copy
    }

    /// The bytes' digest: `ByteHash` under the process's seed (a few
    /// multiplies for a phone number, where a `Hasher` ran SipHash).
    @inline(__always)
    private static func digest(of bytes: UnsafeRawBufferPointer) -> Int {
        Int(truncatingIfNeeded: ByteHash.hash(bytes, seed: seed))
    }

    /// Whether the name's bytes are `bytes`.
    @inline(__always)
    func hasBytes(_ bytes: UnsafeRawBufferPointer) -> Bool {
        withBytes { own in
            guard own.count == bytes.count else { return false }
            guard let a = own.baseAddress, let b = bytes.baseAddress else { return true }
            return ByteHash.equal(a, b, count: own.count)
        }
    }

    /// Calls `body` with the name's UTF-8 bytes.
    public func withBytes<T>(_ body: (UnsafeRawBufferPointer) -> T) -> T {
        // Names are native strings: their bytes are read in place (a
        // mutable copy for `withUTF8` costs a retain and a release).
        if let result = value.utf8.withContiguousStorageIfAvailable({ body(UnsafeRawBufferPointer($0)) }) {
            return result
        }
        var text = value
        return text.withUTF8 { body(UnsafeRawBufferPointer($0)) }
    }

    public static func == (a: KeyName, b: KeyName) -> Bool {
        guard a.digest == b.digest else { return false }
        // The same storage (an interned name against itself) is equal
        // without reading the bytes.
        if unsafeBitCast(a.value, to: (UInt64, UInt64).self)
            == unsafeBitCast(b.value, to: (UInt64, UInt64).self) {
            return true
        }
        return a.withBytes { l in
            b.withBytes { r in
                guard l.count == r.count else { return false }
                guard let lb = l.baseAddress, let rb = r.baseAddress else { return true }
                return ByteHash.equal(lb, rb, count: l.count)
            }
        }
    }

    public static func < (a: KeyName, b: KeyName) -> Bool {
        var left = a.value
        var right = b.value
        return left.withUTF8 { l in
            right.withUTF8 { r in
                guard let lb = l.baseAddress, let rb = r.baseAddress else { return l.count < r.count }
                let order = memcmp(lb, rb, min(l.count, r.count))
                return order != 0 ? order < 0 : l.count < r.count
            }
        }
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(digest)
    }

    /// The dictionaries' hash (policies, titles, scope observers): the
    /// digest mixed with the table's seed in one multiply, not a `Hasher`.
    public func _rawHashValue(seed: Int) -> Int {
        Int(truncatingIfNeeded: ByteHash.mix(
            UInt64(UInt(bitPattern: digest)) ^ UInt64(UInt(bitPattern: seed)), Self.mixer))
    }
}

/// A strict UTF-8 check (no overlong forms, no surrogates, nothing past
/// U+10FFFF), with a fast path for ASCII.
public enum UTF8Check {
    /// Whether 1 to 32 bytes are all ASCII (the caller checks the count).
    @inline(__always)
    public static func isShortASCII(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        guard let base = bytes.baseAddress else { return false }
        let raw = UnsafeRawPointer(base)
        let count = bytes.count
        var high: UInt64 = 0
        // Whole words, the last one overlapping its neighbour: no byte loop.
        if count >= 8 {
            var index = 0
            while index + 8 < count {
                high |= raw.loadUnaligned(fromByteOffset: index, as: UInt64.self)
                index &+= 8
            }
            high |= raw.loadUnaligned(fromByteOffset: count - 8, as: UInt64.self)
        } else if count >= 4 {
            high = UInt64(raw.loadUnaligned(as: UInt32.self))
                | UInt64(raw.loadUnaligned(fromByteOffset: count - 4, as: UInt32.self))
        } else {
            for index in 0..<count { high |= UInt64(base[index]) }
        }
        return high & 0x8080_8080_8080_8080 == 0
    }

    static func isValid(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        var index = 0
        let count = bytes.count
        if let base = bytes.baseAddress {
            // Eight ASCII bytes at a time.
            while count - index >= 8 {
                let word = UnsafeRawPointer(base).loadUnaligned(fromByteOffset: index, as: UInt64.self)
                if word & 0x8080_8080_8080_8080 != 0 { break }
                index += 8
            }
        }
        while index < count {
            let lead = bytes[index]
            if lead < 0x80 {
                index += 1
                continue
            }
            let length: Int
            var lower: UInt8 = 0x80
            var upper: UInt8 = 0xBF
            switch lead {
            case 0xC2...0xDF: length = 2
            case 0xE0: length = 3; lower = 0xA0
            case 0xE1...0xEC, 0xEE...0xEF: length = 3
            case 0xED: length = 3; upper = 0x9F
            case 0xF0: length = 4; lower = 0x90
            case 0xF1...0xF3: length = 4
            case 0xF4: length = 4; upper = 0x8F
            default: return false
            }
            guard count - index >= length else { return false }
            let second = bytes[index + 1]
            guard second >= lower && second <= upper else { return false }
            var offset = 2
            while offset < length {
                let next = bytes[index + offset]
                guard next >= 0x80 && next <= 0xBF else { return false }
                offset += 1
            }
            index += length
        }
        return true
    }
}
