/// Why a call failed. The raw values are the C API's `tg_status` values.
public enum Status: Int32, Sendable {
    case ok = 0
    case invalidArgument = 1
    case invalidKey = 2
    case invalidDuration = 3
    case notFound = 4
    case coolingDown = 5
    case closed = 6
    case invalidHandle = 7
    case wrongMode = 8
    case busy = 9
    case version = 10
    case system = 11
    case inFlight = 12
    case locked = 13
    case expired = 14
    case invalidTemplate = 15
    case storeCorrupt = 16
    case storeVersion = 17
    case storeIO = 18
    case codeDead = 19

    /// Static English text for the status.
    public var text: StaticString {
        switch self {
        case .ok: "ok"
        case .invalidArgument: "invalid argument"
        case .invalidKey: "invalid key"
        case .invalidDuration: "invalid duration"
        case .notFound: "not found"
        case .coolingDown: "cooling down"
        case .closed: "engine closed"
        case .invalidHandle: "invalid handle"
        case .wrongMode: "wrong mode"
        case .busy: "busy"
        case .version: "unsupported struct version"
        case .system: "system error"
        case .inFlight: "send in flight"
        case .locked: "locked"
        case .expired: "ticket expired"
        case .invalidTemplate: "invalid title template"
        case .storeCorrupt: "store corrupt"
        case .storeVersion: "store from a newer version"
        case .storeIO: "store I/O error"
        case .codeDead: "code dead"
        }
    }
}

/// A failed call: its status, a detail message, for `.coolingDown`,
/// `.inFlight` and `.locked` the wait, and for a send refused by a budget
/// the index of that budget key in the send's list.
public struct TickgateError: Error, Sendable {
    public let status: Status
    public let message: String
    public let remaining: Span
    public let budgetIndex: Int?

    public init(_ status: Status, _ message: String, remaining: Span = .zero, budgetIndex: Int? = nil) {
        self.status = status
        self.message = message
        self.remaining = remaining
        self.budgetIndex = budgetIndex
    }
}
