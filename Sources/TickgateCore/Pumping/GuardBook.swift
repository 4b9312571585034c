/// The guards of an engine: each guarded scope's rules (the store's copy
/// when a store holds them), memory's signals (no store), and the codes
/// this engine granted that have not ended yet.
struct GuardBook {
    /// A granted code, until its send ends.
    struct PendingCode {
        var scope: KeyName
        var subject: KeyName
        var code: String
        var country: String
        var address: ClientAddress?
    }

    private(set) var rules: [KeyName: Guard] = [:]
    var ledgers: [KeyName: ConversionLedger] = [:]
    var pending: [UInt64: PendingCode] = [:]
    /// Memory's passed challenges: per scope, per number and address
    /// (`passKey`), until when the pass waits for its send.
    var passes: [KeyName: [String: Instant]] = [:]
    /// Memory's codes followed for their outcome, per scope.
    var followed: [KeyName: FollowedCodes] = [:]
    /// When this engine last swept a store's followed codes, per scope.
    var lastSweep: [KeyName: Instant] = [:]
    /// Most passes one scope holds waiting.
    static let maximumPasses = 100_000

    static func passKey(_ subject: KeyName, _ address: ClientAddress?) -> String {
        subject.value + "|" + (address?.description ?? "")
    }
    /// Most codes held until their send ends.
    static let maximumPending = 100_000
    /// Makes this engine's code ids unique among every engine on a store.
    let nonce = String(UInt64.random(in: 1 ... .max), radix: 36)

    private var codes: UInt64 = 0

    /// A new code id (a code is counted before its ticket exists).
    mutating func nextCode() -> String {
        codes &+= 1
        return nonce + "-" + String(codes)
    }

    mutating func set(_ rules: Guard?, scope: KeyName) {
        self.rules[scope] = rules
    }

    mutating func replaceRules(_ rules: [KeyName: Guard]) { self.rules = rules }
}
