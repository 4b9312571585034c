/// The identity of a countdown: a scope (a business scenario such as
/// "login") and a subject (a phone number, an e-mail address).
public struct CountdownKey: Hashable, Comparable, Sendable {
    public let scope: String
    public let subject: String

    /// A key from two already validated names.
    public init(scope: KeyName, subject: KeyName) {
        self.scope = scope.value
        self.subject = subject.value
    }

    public static func < (a: CountdownKey, b: CountdownKey) -> Bool {
        (a.scope, a.subject) < (b.scope, b.subject)
    }
}

/// A scope or subject that passed validation: 1 to `Limits.maximumKeyBytes`
/// bytes of valid UTF-8.
public struct KeyName: Hashable, Sendable {
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
}
