/// Why a segment expression was refused, and where.
///
/// `description` is what a user sees: `at 17: expected a value after '=', found
/// end of input`. The position counts characters (Unicode code points) from 1;
/// "end of input" is one past the last character. ``code`` is a short fixed
/// string, safe as a metric label.
package struct SegmentError: Error, CustomStringConvertible, Equatable, Sendable {
    private enum Code: String {
        /// Not well-formed: a missing operand, parenthesis, operator or value.
        case syntax
        /// A character the language does not use (control, typographic quote,
        /// `;`, single quote...).
        case invalidCharacter = "invalid_character"
        /// A field that is not on the allowlist.
        case unknownField = "unknown_field"
        /// Well-formed, but a value the field does not accept.
        case invalidValue = "invalid_value"
        /// Longer, deeper or with more terms or list values than allowed.
        case tooLarge = "too_large"
    }

    private let kind: Code
    /// 1-based character position of the problem.
    package let position: Int
    /// What was expected and what was found, without the position.
    package let message: String

    private init(_ kind: Code, at position: Int, _ message: String) {
        self.kind = kind
        self.position = position
        self.message = message
    }

    /// Machine-readable code: `syntax`, `invalid_character`, `unknown_field`,
    /// `invalid_value` or `too_large`.
    package var code: String { kind.rawValue }

    package var description: String { "at \(position): \(message)" }

    package static func syntax(at position: Int, _ message: String) -> SegmentError {
        SegmentError(.syntax, at: position, message)
    }

    package static func invalidCharacter(at position: Int, _ message: String) -> SegmentError {
        SegmentError(.invalidCharacter, at: position, message)
    }

    package static func unknownField(at position: Int, _ message: String) -> SegmentError {
        SegmentError(.unknownField, at: position, message)
    }

    package static func invalidValue(at position: Int, _ message: String) -> SegmentError {
        SegmentError(.invalidValue, at: position, message)
    }

    package static func tooLarge(at position: Int, _ message: String) -> SegmentError {
        SegmentError(.tooLarge, at: position, message)
    }

    /// Every code this error can carry, for documentation and metric pre-registration.
    package static let allCodes: [String] = ["syntax", "invalid_character", "unknown_field", "invalid_value", "too_large"]
}

/// Bounds on what the parser accepts, so that hostile input costs little and
/// compiled SQL stays within what the databases accept.
package struct SegmentLimits: Sendable, Equatable {
    /// Longest expression, in UTF-8 bytes; a campaign record's `audience.segment`
    /// has the same bound (`Campaign.maxSegmentBytes`).
    package var maxBytes: Int
    /// Deepest nesting of parentheses and `not`s, counted together. SQLite's
    /// parser has a fixed stack of 100 entries (YYSTACKDEPTH) and each level of
    /// nesting in the generated SQL can take up to four, so 16 levels leave room
    /// (about 20 entries, checked by the tests on the deepest shapes) for the
    /// query the store wraps around the condition. Real audiences rarely nest
    /// more than three levels.
    package var maxDepth: Int
    /// Most terms (tags, comparisons, `last_seen`) in one expression.
    package var maxTerms: Int
    /// Most values in one `in (...)` list.
    package var maxListValues: Int

    package init(
        maxBytes: Int = 4_096, maxDepth: Int = 16, maxTerms: Int = 200, maxListValues: Int = 500
    ) {
        self.maxBytes = maxBytes
        self.maxDepth = maxDepth
        self.maxTerms = maxTerms
        self.maxListValues = maxListValues
    }

    /// The limits every entry point uses.
    package static let standard = SegmentLimits()
}
