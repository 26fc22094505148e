import Testing
@testable import PushfanCLI

@Suite struct ArgumentsTests {
    let spec = CommandSpec(
        name: "try this", summary: "a test command", positionals: ["FILE", "[MORE]"],
        options: [.option("count", "N", "how many"), .option("tag", "T", "tags", repeatable: true), .flag("dry-run", "do nothing")])

    @Test func parsesOptionsFlagsAndPositionals() throws {
        let parsed = try spec.parse(["input.json", "--count", "5", "--tag=a", "--tag", "b", "--dry-run"])
        #expect(parsed.positionals == ["input.json"])
        #expect(try parsed.int("count", default: 0) == 5)
        #expect(parsed.values("tag") == ["a", "b"])
        #expect(parsed.flag("dry-run"))
    }

    @Test func doubleDashEndsOptions() throws {
        let parsed = try spec.parse(["--", "--count"])
        #expect(parsed.positionals == ["--count"])
    }

    @Test(arguments: [
        (["f", "--colour", "red"], "unknown option --colour for 'pushfan try this'"),
        (["f", "--count"], "--count needs a value (N)"),
        (["f", "--count", "1", "--count", "2"], "--count was given more than once"),
        (["f", "--dry-run=yes"], "--dry-run takes no value"),
        ([], "'pushfan try this' needs FILE"),
        (["a", "b", "c"], "unexpected argument 'c'"),
    ])
    func rejectsMistakesWithAClearMessage(arguments: [String], message: String) {
        #expect(throws: UsageError.self) { try spec.parse(arguments) }
        do {
            _ = try spec.parse(arguments)
        } catch {
            #expect(error.description.contains(message), "got: \(error.description)")
        }
    }

    @Test func typedAccessorsRefuseBadValues() throws {
        let parsed = try spec.parse(["f", "--count", "many"])
        #expect(throws: UsageError("--count must be a whole number in 1...10, got 'many'")) {
            try parsed.int("count", default: 1, range: 1...10)
        }
        let outOfRange = try spec.parse(["f", "--count", "11"])
        #expect(throws: UsageError.self) { try outOfRange.int("count", default: 1, range: 1...10) }
    }

    @Test func helpListsEveryOption() {
        for command in PushfanMain.commands {
            let help = command.spec.help
            for option in command.spec.options {
                #expect(help.contains("--\(option.name)"), "\(command.spec.name) help lacks --\(option.name)")
            }
        }
        let names = PushfanMain.commands.map { $0.spec.name }
        #expect(Set(names).count == names.count)
    }
}
