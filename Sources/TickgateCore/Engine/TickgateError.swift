// `Status` and `StoreFailure`, the lists this error carries, are generated
// from the C header's tables (Status.swift, StoreFailure.swift; see
// include/tickgate_status.h).

/// A failed call: its status, a detail message, for `.coolingDown`,
/// `.inFlight` and `.locked` the wait, for a send refused by a budget the
/// index of that budget key in the send's list, and for a store failure its
/// kind.
public struct TickgateError: Error, Sendable {
    public let status: Status
    public let message: String
    public let remaining: Span
    public let budgetIndex: Int?
    /// For a store failure (`.storeIO`, `.storeUnknown`, `.storeCorrupt`,
    /// `.storeVersion`), what kind it is; `.none` otherwise. The C boundary
    /// keeps it beside the message for `tg_last_store_failure()`.
    public let storeFailure: StoreFailure
    /// Set by a store that refused an unguarded send because the scope has
    /// a guard this engine did not know of yet (Pumping/Engine+Guard.swift
    /// sends it through the guard).
    var scopeIsGuarded = false
    /// A guarded send screened in the step that decides it was not passed
    /// by the guard (another guard, a refusal by the signals, a corrupt or
    /// late screen): the decision's `guardScreen` says how; nothing changed.
    var guardAnswered = false

    /// The store's answer that `scope` has a guard: the send must go
    /// through it.
    static func guarded(_ scope: KeyName) -> TickgateError {
        var error = TickgateError(.destinationRefused, "the scope \(scope.value) has a guard this engine had not heard of yet")
        error.scopeIsGuarded = true
        return error
    }

    /// The store's answer that the guard did not pass a send it screened in
    /// the decision's step (`guardAnswered`).
    static func guardAnswer(_ scope: KeyName) -> TickgateError {
        var error = TickgateError(.pumpingSuspected, "the guard of \(scope.value) did not pass the send")
        error.guardAnswered = true
        return error
    }

    public init(_ status: Status, _ message: String, remaining: Span = .zero, budgetIndex: Int? = nil,
                store storeFailure: StoreFailure = .none) {
        self.status = status
        self.message = message
        self.remaining = remaining
        self.budgetIndex = budgetIndex
        self.storeFailure = storeFailure
    }
}
