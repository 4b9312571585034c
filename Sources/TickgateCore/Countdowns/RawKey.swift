/// A key as the caller's bytes: a scope and a subject that passed
/// `KeyName.validate`, borrowed for one call. The fast paths find
/// countdowns by these bytes without making names; `names()` makes them
/// when a slower path (the store, observers, an error message) needs them.
public struct RawKey {
    public let scope: UnsafeRawBufferPointer
    public let subject: UnsafeRawBufferPointer

    /// `scope` and `subject` must have passed `KeyName.validate`.
    public init(scope: UnsafeRawBufferPointer, subject: UnsafeRawBufferPointer) {
        self.scope = scope
        self.subject = subject
    }

    public func names() -> CountdownKey {
        CountdownKey(scope: KeyName(validated: scope), subject: KeyName(validated: subject))
    }
}
