import Foundation

/// One option of a command. A nil `value` makes it a flag that takes no argument.
package struct OptionSpec: Sendable {
    package let name: String
    package let value: String?
    package let help: String
    package let repeatable: Bool

    package static func option(_ name: String, _ value: String, _ help: String, repeatable: Bool = false) -> OptionSpec {
        OptionSpec(name: name, value: value, help: help, repeatable: repeatable)
    }

    package static func flag(_ name: String, _ help: String) -> OptionSpec {
        OptionSpec(name: name, value: nil, help: help, repeatable: false)
    }

    /// `--app KEY`, which most commands about one app require.
    package static let app = option("app", "KEY", "app key (required)")
}

/// What a command accepts; `--help` is generated from it.
package struct CommandSpec: Sendable {
    /// One or more words: `kafka-dev`, `bench kafka`.
    package let name: String
    package let summary: String
    /// Free text after the synopsis: behaviour, examples, exit codes.
    package let discussion: String
    package let positionals: [String]
    package let options: [OptionSpec]

    package init(name: String, summary: String, discussion: String = "", positionals: [String] = [], options: [OptionSpec]) {
        self.name = name
        self.summary = summary
        self.discussion = discussion
        self.positionals = positionals
        self.options = options + CommandSpec.commonOptions
    }

    /// Options every command understands.
    package static let commonOptions: [OptionSpec] = [
        .option("config", "FILE", "JSON configuration file (default: $PUSHFAN_CONFIG)"),
        .option("log-level", "LEVEL", "debug, info, notice, warning or error (default: info)"),
        .flag("help", "show this help"),
    ]

    package var help: String {
        var text = "\(summary)\n\nUsage: pushfan \(name)"
        for positional in positionals { text += " \(positional)" }
        if !options.isEmpty { text += " [options]" }
        text += "\n\nOptions:\n"
        let rows = options.map { option in
            ("--\(option.name)" + (option.value.map { " \($0)" } ?? ""), option.help + (option.repeatable ? " (repeatable)" : ""))
        }
        let width = (rows.map(\.0.count).max() ?? 0) + 2
        for (left, right) in rows {
            text += "  " + left.padding(toLength: width, withPad: " ", startingAt: 0) + right + "\n"
        }
        if !discussion.isEmpty { text += "\n" + discussion + "\n" }
        return text
    }

    /// Parses `--name value`, `--name=value` and flags; anything unknown is a usage error.
    package func parse(_ arguments: [String]) throws(UsageError) -> ParsedArguments {
        var parsed = ParsedArguments()
        var index = 0
        var onlyPositionals = false
        while index < arguments.count {
            let argument = arguments[index]
            index += 1
            if onlyPositionals || !argument.hasPrefix("--") || argument == "-" {
                parsed.positionals.append(argument)
                continue
            }
            if argument == "--" {
                onlyPositionals = true
                continue
            }
            var name = String(argument.dropFirst(2))
            var inline: String?
            if let equals = name.firstIndex(of: "=") {
                inline = String(name[name.index(after: equals)...])
                name = String(name[..<equals])
            }
            guard let spec = options.first(where: { $0.name == name }) else {
                throw UsageError("unknown option --\(name) for 'pushfan \(self.name)'; see 'pushfan \(self.name) --help'")
            }
            if spec.value == nil {
                guard inline == nil else { throw UsageError("--\(name) takes no value") }
                parsed.flags.insert(name)
                continue
            }
            let value: String
            if let inline {
                value = inline
            } else {
                guard index < arguments.count else { throw UsageError("--\(name) needs a value (\(spec.value!))") }
                value = arguments[index]
                index += 1
            }
            if !spec.repeatable, parsed.options[name] != nil {
                throw UsageError("--\(name) was given more than once")
            }
            parsed.options[name, default: []].append(value)
        }
        if !parsed.flags.contains("help") {
            let required = positionals.filter { !$0.hasPrefix("[") }
            if parsed.positionals.count < required.count {
                throw UsageError("'pushfan \(name)' needs \(required.joined(separator: " ")); see 'pushfan \(name) --help'")
            }
            if parsed.positionals.count > positionals.count {
                throw UsageError("unexpected argument '\(parsed.positionals[positionals.count])' for 'pushfan \(name)'")
            }
        }
        return parsed
    }
}

/// The result of parsing: typed accessors turn bad values into usage errors.
package struct ParsedArguments: Sendable {
    package var options: [String: [String]] = [:]
    package var flags: Set<String> = []
    package var positionals: [String] = []

    package func value(_ name: String) -> String? { options[name]?.last }
    package func values(_ name: String) -> [String] { options[name] ?? [] }
    package func flag(_ name: String) -> Bool { flags.contains(name) }

    package func required(_ name: String) throws(UsageError) -> String {
        guard let value = value(name), !value.isEmpty else { throw UsageError("--\(name) is required") }
        return value
    }

    package func int(_ name: String, default fallback: Int, range: ClosedRange<Int> = Int.min...Int.max) throws(UsageError) -> Int {
        guard let text = value(name) else { return fallback }
        guard let number = Int(text), range.contains(number) else {
            throw UsageError("--\(name) must be a whole number in \(range.lowerBound)...\(range.upperBound), got '\(text)'")
        }
        return number
    }

    package func double(_ name: String, default fallback: Double, range: ClosedRange<Double> = -Double.greatestFiniteMagnitude...Double.greatestFiniteMagnitude) throws(UsageError) -> Double {
        guard let text = value(name) else { return fallback }
        guard let number = Double(text), range.contains(number) else {
            throw UsageError("--\(name) must be a number in \(range.lowerBound)...\(range.upperBound), got '\(text)'")
        }
        return number
    }
}

/// A mistake in how a command was called: printed with a pointer to `--help`, exit code 2.
package struct UsageError: Error, CustomStringConvertible, Equatable {
    package let description: String
    package init(_ description: String) { self.description = description }
}
