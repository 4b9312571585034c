/// A title template: literal text and placeholders, parsed once when the
/// host sets it so that rendering cannot fail.
public struct TitleTemplate: Sendable, Equatable {
    enum Piece: Sendable, Equatable {
        case text(String)
        case seconds         // {s}
        case minutes         // {m}
        case minutesSeconds  // {m:ss}
    }

    public static let maximumBytes = 128
    public static let maximumPlaceholders = 8
    let pieces: [Piece]
    /// The text the template was parsed from.
    public let source: String

    init(pieces: [Piece], source: String) {
        self.pieces = pieces
        self.source = source
    }

    /// Parses `source`; `role` names the template in errors.
    public init(_ source: String, role: String) throws(TickgateError) {
        guard source.utf8.count <= Self.maximumBytes else {
            throw TickgateError(.invalidTemplate, "\(role) title is longer than \(Self.maximumBytes) bytes")
        }
        var pieces: [Piece] = []
        var text = ""
        var placeholders = 0
        var rest = Substring(source)
        while let first = rest.first {
            rest = rest.dropFirst()
            if first == "{" && rest.first == "{" || first == "}" && rest.first == "}" {
                text.append(first)
                rest = rest.dropFirst()
            } else if first == "{" {
                guard let close = rest.firstIndex(of: "}") else {
                    throw TickgateError(.invalidTemplate, "\(role) title has a '{' with no '}'")
                }
                let name = rest[..<close]
                rest = rest[rest.index(after: close)...]
                let piece: Piece
                switch name {
                case "s": piece = .seconds
                case "m": piece = .minutes
                case "m:ss": piece = .minutesSeconds
                default:
                    throw TickgateError(.invalidTemplate,
                        "\(role) title has an unknown placeholder {\(name)}; known: {s}, {m}, {m:ss}")
                }
                placeholders += 1
                if !text.isEmpty { pieces.append(.text(text)); text = "" }
                pieces.append(piece)
            } else if first == "}" {
                throw TickgateError(.invalidTemplate, "\(role) title has a '}' with no '{' (write }} for a brace)")
            } else {
                text.append(first)
            }
        }
        guard placeholders <= Self.maximumPlaceholders else {
            throw TickgateError(.invalidTemplate,
                "\(role) title has more than \(Self.maximumPlaceholders) placeholders")
        }
        if !text.isEmpty { pieces.append(.text(text)) }
        self.pieces = pieces
        self.source = source
    }

    /// The title for `remaining` time.
    public func render(_ remaining: Span) -> String {
        let seconds = remaining.displaySeconds
        var result = ""
        for piece in pieces {
            switch piece {
            case .text(let text): result += text
            case .seconds: result += String(seconds)
            case .minutes: result += String((seconds + 59) / 60)
            case .minutesSeconds:
                let second = seconds % 60
                result += "\(seconds / 60):\(second < 10 ? "0" : "")\(second)"
            }
        }
        return result
    }
}

/// The six titles of a scope's button.
public struct TitleSet: Sendable, Equatable {
    public var idle: TitleTemplate
    public var sending: TitleTemplate
    public var cooling: TitleTemplate
    public var readyAgain: TitleTemplate
    public var locked: TitleTemplate
    public var codeDead: TitleTemplate

    public static let englishCodeDead = TitleTemplate(pieces: [.text("Too many attempts: get a new code")],
                                                      source: "Too many attempts: get a new code")

    /// The titles of a scope whose host set none.
    public static let english = TitleSet(
        idle: TitleTemplate(pieces: [.text("Get code")], source: "Get code"),
        sending: TitleTemplate(pieces: [.text("Sending...")], source: "Sending..."),
        cooling: TitleTemplate(pieces: [.text("Resend ("), .seconds, .text("s)")], source: "Resend ({s}s)"),
        readyAgain: TitleTemplate(pieces: [.text("Resend code")], source: "Resend code"),
        locked: TitleTemplate(pieces: [.text("Try again in "), .minutes, .text(" min")],
                              source: "Try again in {m} min"),
        codeDead: englishCodeDead)

    public init(idle: TitleTemplate, sending: TitleTemplate, cooling: TitleTemplate,
                readyAgain: TitleTemplate, locked: TitleTemplate, codeDead: TitleTemplate) {
        self.idle = idle
        self.sending = sending
        self.cooling = cooling
        self.readyAgain = readyAgain
        self.locked = locked
        self.codeDead = codeDead
    }

    public func render(_ state: ButtonState, _ remaining: Span) -> String {
        switch state {
        case .idle: idle.render(remaining)
        case .sending: sending.render(remaining)
        case .cooling: cooling.render(remaining)
        case .readyAgain: readyAgain.render(remaining)
        case .locked: locked.render(remaining)
        case .codeDead: codeDead.render(remaining)
        }
    }
}
