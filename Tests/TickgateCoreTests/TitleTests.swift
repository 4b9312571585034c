import Testing
@testable import TickgateCore

@Suite struct TitleTests {
    @Test func rendersEveryPlaceholder() throws {
        #expect(try TitleTemplate("重新发送({s}s)", role: "cooling").render(.milliseconds(59_001)) == "重新发送(60s)")
        #expect(try TitleTemplate("請{m}分鐘後再試", role: "locked").render(.milliseconds(540_000)) == "請9分鐘後再試")
        #expect(try TitleTemplate("{m}", role: "locked").render(.milliseconds(540_001)) == "10")
        #expect(try TitleTemplate("あと{m:ss}", role: "locked").render(.milliseconds(545_000)) == "あと9:05")
        #expect(try TitleTemplate("{{s}} {s}", role: "cooling").render(.milliseconds(3_000)) == "{s} 3")
        #expect(try TitleTemplate("", role: "idle").render(.zero) == "")
    }

    @Test(arguments: ["{x}", "{s", "}", "a}b", "{S}", String(repeating: "a", count: 129),
                      String(repeating: "{s}", count: 9)])
    func refusesBadTemplates(_ source: String) {
        #expect(throws: TickgateError.self) { try TitleTemplate(source, role: "cooling") }
    }

    @Test func englishDefaults() {
        let english = TitleSet.english
        #expect(english.render(.idle, .zero) == "Get code")
        #expect(english.render(.cooling, .milliseconds(42_000)) == "Resend (42s)")
        #expect(english.render(.locked, .milliseconds(61_000)) == "Try again in 2 min")
    }
}
