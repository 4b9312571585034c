/// A text from the host as an error message quotes it: in double quotes,
/// control characters, quotes and backslashes escaped, and cut after
/// `maximumScalars` characters (then "..."), so a NUL, a line break or ten
/// thousand characters never reach a log whole.
enum MessageQuote {
    static let maximumScalars = 48

    static func of(_ text: String) -> String {
        let scalars = text.unicodeScalars
        let kept = String(String.UnicodeScalarView(scalars.prefix(maximumScalars)))
        let cut = scalars.count > maximumScalars
        return kept.debugDescription + (cut ? "..." : "")
    }
}
