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
}

/// A scope, subject or realm that passed validation: 1 to
/// `Limits.maximumKeyBytes` bytes of valid UTF-8. Names compare as bytes,
/// as they do in C: "é" (U+00E9) and "e" + U+0301 are different names,
/// although Swift's `String` would call them equal.
public struct KeyName: Hashable, Comparable, Sendable {
    public let value: String

    /// Validates raw bytes; `role` ("scope", "subject") names the field in the
    /// error message.
    public init(bytes: UnsafeBufferPointer<UInt8>, role: String) throws(TickgateError) {
        if bytes.isEmpty {
            throw TickgateError(.invalidKey, "\(role) is empty")
        }
        if bytes.count > Limits.maximumKeyBytes {
            throw TickgateError(.invalidKey, "\(role) is longer than \(Limits.maximumKeyBytes) bytes")
        }
        guard let text = String(validating: bytes, as: UTF8.self) else {
            throw TickgateError(.invalidKey, "\(role) is not valid UTF-8")
        }
        value = text
    }

    /// Validates a Swift string (already valid Unicode) for length.
    public init(_ text: String, role: String = "name") throws(TickgateError) {
        let count = text.utf8.count
        if count == 0 { throw TickgateError(.invalidKey, "\(role) is empty") }
        if count > Limits.maximumKeyBytes {
            throw TickgateError(.invalidKey, "\(role) is longer than \(Limits.maximumKeyBytes) bytes")
        }
        value = text
    }

    public static func == (a: KeyName, b: KeyName) -> Bool {
        a.value.utf8.elementsEqual(b.value.utf8)
    }

    public static func < (a: KeyName, b: KeyName) -> Bool {
        a.value.utf8.lexicographicallyPrecedes(b.value.utf8)
    }

    public func hash(into hasher: inout Hasher) {
        var text = value
        text.withUTF8 { hasher.combine(bytes: UnsafeRawBufferPointer($0)) }
    }
}
