import PushfanMessages
import PushfanSegments

/// A value bound to a statement parameter.
package enum SQLValue: Sendable, Equatable {
    case null
    case integer(Int64)
    case real(Double)
    case text(String)

    static func optional(_ text: String?) -> SQLValue { text.map(SQLValue.text) ?? .null }
    static func optional(_ value: Int64?) -> SQLValue { value.map(SQLValue.integer) ?? .null }
}

/// A statement written once for both backends. Interpolated values become parameters
/// (`?` for SQLite, `$N` for PostgreSQL) and segments are compiled for the dialect when
/// the statement is rendered, so user input never enters the SQL text.
struct SQLStatement: ExpressibleByStringInterpolation, Sendable {
    enum Piece: Sendable {
        case text(String)
        case value(SQLValue)
        case segment(SegmentExpression, now: Int64)
        case jsonText(column: String, key: String)
        case deviceUser(alias: String)
    }

    var pieces: [Piece] = []

    init(stringLiteral value: String) { pieces = [.text(value)] }

    init(stringInterpolation: StringInterpolation) { pieces = stringInterpolation.pieces }

    /// A plain query (`SELECT …`), which can be sent again without changing anything.
    var isRead: Bool {
        guard case .text(let first)? = pieces.first else { return false }
        return first.drop(while: { $0 == " " || $0 == "\n" }).prefix(7).uppercased() == "SELECT "
    }

    struct StringInterpolation: StringInterpolationProtocol {
        var pieces: [Piece] = []
        init(literalCapacity: Int, interpolationCount: Int) {}
        mutating func appendLiteral(_ literal: String) { pieces.append(.text(literal)) }
        mutating func appendInterpolation(_ value: SQLValue) { pieces.append(.value(value)) }
        mutating func appendInterpolation(_ text: String) { pieces.append(.value(.text(text))) }
        /// A campaign as every table names it: `<app>/<id>` (`CampaignKey.stored`).
        mutating func appendInterpolation(_ campaign: CampaignKey) { pieces.append(.value(.text(campaign.stored))) }
        mutating func appendInterpolation(_ number: Int64) { pieces.append(.value(.integer(number))) }
        mutating func appendInterpolation(_ number: Int) { pieces.append(.value(.integer(Int64(number)))) }
        mutating func appendInterpolation(segment: SegmentExpression, now: Int64) { pieces.append(.segment(segment, now: now)) }
        /// The text of member `key` of the JSON object in text column `column` (NULL without one).
        mutating func appendInterpolation(jsonText column: String, key: String) { pieces.append(.jsonText(column: column, key: key)) }
        /// The user of a device row (`Users`): its `user_id` attribute as text, written as the
        /// index `devices_by_user` has it, so that lookups by user use the index. `alias` names
        /// the devices table in the statement.
        mutating func appendInterpolation(userOf alias: String) { pieces.append(.deviceUser(alias: alias)) }
        /// Fixed SQL chosen by Pushfan (never user input), e.g. a column list.
        mutating func appendInterpolation(raw: String) { pieces.append(.text(raw)) }
    }

    /// Appends in place; building long multi-row statements with `+` would copy each time.
    mutating func append(_ other: SQLStatement) { pieces += other.pieces }

    static func + (lhs: SQLStatement, rhs: SQLStatement) -> SQLStatement {
        var joined = lhs
        joined.pieces += rhs.pieces
        return joined
    }

    func render(_ syntax: some SQLSyntax) -> (sql: String, parameters: [SQLValue]) {
        var sql = ""
        var parameters: [SQLValue] = []
        for piece in pieces {
            switch piece {
            case .text(let text):
                sql += text
            case .value(let value):
                parameters.append(value)
                sql += syntax.placeholder(parameters.count, type: nil)
            case .segment(let expression, let now):
                // The segment's parameters follow the statement's so far, in order.
                let compiled = SegmentSQL.compile(expression, syntax: syntax, now: now, firstParameterIndex: parameters.count + 1)
                sql += "(" + compiled.sql + ")"
                parameters += compiled.parameters
            case .jsonText(let column, let key):
                sql += syntax.jsonText(column, key: key) { value in
                    parameters.append(value)
                    return syntax.placeholder(parameters.count, type: .text)
                }
            case .deviceUser(let alias):
                sql += syntax.deviceUser(alias)
            }
        }
        return (sql, parameters)
    }
}

/// How a dialect writes what statements and compiled segments leave open. Each backend's
/// connection renders with its own (`SQLiteSyntax`, `PostgresSyntax`).
protocol SQLSyntax {
    /// The placeholder of parameter `number` (from 1); `type` asks for a typed one where
    /// the dialect would otherwise infer it.
    func placeholder(_ number: Int, type: SQLParameterType?) -> String
    /// The false literal.
    var falseValue: String { get }
    /// What makes a text comparison order byte-wise (appended to the column).
    var byteOrder: String { get }
    /// Reading attribute `key` of `d.attributes` as `kind`: `check` is true when the member
    /// holds that JSON kind, `member` its value for comparing with a bound literal.
    /// `bind` binds a parameter and returns its placeholder.
    func attribute(_ key: String, kind: SQLAttributeKind, ordering: Bool, bind: (SQLValue) -> String) -> (check: String, member: String)
    /// The text of member `key` of a JSON object kept as text in `column`.
    func jsonText(_ column: String, key: String, bind: (SQLValue) -> String) -> String
    /// The `user_id` attribute of the devices row aliased `alias`, as text (NULL without
    /// one), spelled exactly as the expression index `devices_by_user` (migration 23) is.
    func deviceUser(_ alias: String) -> String
}

/// The type a typed placeholder is cast to.
enum SQLParameterType: String {
    case text, bigint, numeric
}

/// The JSON kinds a segment compares an attribute with.
enum SQLAttributeKind: CaseIterable {
    case text, number, bool

    init(_ value: SegmentAttributeValue) {
        switch value {
        case .text: self = .text
        case .integer, .real: self = .number
        case .bool: self = .bool
        }
    }
}

/// One result row; columns by position.
protocol SQLRow {
    func int(_ column: Int) -> Int64?
    func double(_ column: Int) -> Double?
    func text(_ column: Int) -> String?
    /// Whether the column holds exactly `literal`, compared in place: expansion reads a
    /// million small enum values, and a `String` for each is measurable.
    func text(_ column: Int, equals literal: StaticString) -> Bool
}

extension SQLRow {
    /// A campaign column (`<app>/<id>`, `CampaignKey.stored`).
    func campaign(_ column: Int) throws(StoreError) -> CampaignKey {
        guard let key = text(column).flatMap(CampaignKey.init(stored:)) else {
            throw StoreError.database("a campaign column holds '\(text(column) ?? "")', not <app>/<id>")
        }
        return key
    }
}

/// A connection used by one caller at a time, on a thread that may block.
protocol SQLConnection: AnyObject {
    /// Runs a statement; returns the number of rows it changed.
    @discardableResult
    func execute(_ statement: SQLStatement) throws(StoreError) -> Int
    func query(_ statement: SQLStatement, _ row: (any SQLRow) throws(StoreError) -> Void) throws(StoreError)
    /// Runs `body` in a transaction that takes the write lock up front.
    func transaction<T>(_ body: () throws(StoreError) -> T) throws(StoreError) -> T
    /// Runs several statements given as one script (migrations); no parameters.
    func executeScript(_ sql: String) throws(StoreError)
}

extension SQLConnection {
    func queryAll<T>(_ statement: SQLStatement, _ map: (any SQLRow) throws(StoreError) -> T) throws(StoreError) -> [T] {
        var rows: [T] = []
        try query(statement) { row throws(StoreError) in rows.append(try map(row)) }
        return rows
    }

    func queryOne<T>(_ statement: SQLStatement, _ map: (any SQLRow) throws(StoreError) -> T) throws(StoreError) -> T? {
        try queryAll(statement, map).first
    }
}

extension SQLValue {
    /// The value as libpq's text form of a parameter (nil for NULL).
    var postgresText: String? {
        switch self {
        case .null: nil
        case .integer(let number): String(number)
        case .real(let number): String(number)
        case .text(let text): text
        }
    }
}

/// PostgreSQL array literals (`{"a","b",NULL}`), for passing many values as one parameter.
enum PostgresArray {
    /// Built from UTF-8 bytes: iterating `Character`s here cost a quarter of an import.
    static func literal(_ values: [String?]) -> String {
        var bytes: [UInt8] = [UInt8(ascii: "{")]
        bytes.reserveCapacity(values.count * 24)
        for (index, value) in values.enumerated() {
            if index > 0 { bytes.append(UInt8(ascii: ",")) }
            guard let value else {
                bytes.append(contentsOf: "NULL".utf8)
                continue
            }
            bytes.append(UInt8(ascii: "\""))
            for byte in value.utf8 {
                if byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") { bytes.append(UInt8(ascii: "\\")) }
                bytes.append(byte)
            }
            bytes.append(UInt8(ascii: "\""))
        }
        bytes.append(UInt8(ascii: "}"))
        return String(decoding: bytes, as: UTF8.self)
    }
}
