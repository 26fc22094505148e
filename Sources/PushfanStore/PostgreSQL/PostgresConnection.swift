internal import CLibpq
import Foundation
import PushfanMessages
import PushfanSupport

/// One libpq connection. A dropped connection is re-established with backoff on the next
/// statement; while the server stays unreachable, calls fail with "store unavailable" so
/// callers can pause instead of failing devices. Used from the store's serial queue only.
final class PostgresConnection: SQLConnection {
    private var connection: OpaquePointer?
    private let url: String
    private let logger: Logger
    private var inTransaction = false
    /// Server-side prepared statements by SQL text, for the short statements that repeat
    /// (pages, claims): they are parsed and planned once per connection, not per call.
    private var prepared: [String: String] = [:]
    private let preparedLimit = 256
    private let maxPreparedParameters = 64
    /// Waits between reconnection attempts within one call.
    private let backoff: [Duration] = [.milliseconds(100), .milliseconds(400), .seconds(1)]

    init(url: String, logger: Logger) throws(StoreError) {
        self.url = url
        self.logger = logger
        try connect()
    }

    deinit { PQfinish(connection) }

    /// The URL without its secrets (the user part's password; the `password` and
    /// `sslpassword` parameters, which libpq reads too), for logs and errors; one it cannot
    /// read shows none of itself.
    static func redact(_ url: String) -> String {
        guard var components = URLComponents(string: url), let scheme = components.scheme else { return "(an unreadable database URL)" }
        if components.password != nil { components.password = "***" }
        let secret = { (item: URLQueryItem) in ["password", "sslpassword"].contains(item.name.lowercased()) }
        if let items = components.queryItems, items.contains(where: secret) {
            components.queryItems = items.map { secret($0) ? URLQueryItem(name: $0.name, value: "***") : $0 }
        }
        return components.string ?? "\(scheme)://…"
    }

    private func connect() throws(StoreError) {
        PQfinish(connection)
        prepared.removeAll()
        connection = PQconnectdb(url)
        guard let connection, PQstatus(connection) == CONNECTION_OK else {
            let message = connection.map { String(cString: PQerrorMessage($0)) } ?? "out of memory"
            throw StoreError.unavailable("cannot connect to PostgreSQL at \(PostgresConnection.redact(url)): \(message.trimmingCharacters(in: .whitespacesAndNewlines))")
        }
        // Warnings (e.g. "no transaction in progress") are not errors; keep them out of stderr.
        _ = PQexec(connection, "SET client_min_messages = warning").map { PQclear($0) }
    }

    /// Re-establishes a lost connection, waiting a little longer after each failed attempt.
    private func ensureConnected() throws(StoreError) {
        if let connection, PQstatus(connection) == CONNECTION_OK { return }
        var lastError = StoreError.unavailable("PostgreSQL connection lost")
        for (attempt, delay) in backoff.enumerated() {
            do {
                try connect()
                logger.notice("store.reconnected", ["store.attempt": String(attempt + 1)])
                return
            } catch {
                lastError = error
                Thread.sleep(forTimeInterval: delay.seconds)
            }
        }
        throw lastError
    }

    /// Runs one statement and hands back its result (caller clears it).
    ///
    /// A connection that died while idle (the server restarted) is only noticed when it is
    /// used; a read outside a transaction is then sent once more over a new connection.
    /// Writes are not resent: the server may have applied them before the connection broke.
    private func exec(_ statement: SQLStatement) throws(StoreError) -> OpaquePointer {
        do {
            return try execOnce(statement)
        } catch {
            guard !inTransaction, let connection, PQstatus(connection) != CONNECTION_OK, statement.isRead else { throw error }
            logger.notice("store.connection_lost", ["store.action": "reconnect_and_retry_read"])
            return try execOnce(statement)
        }
    }

    private func execOnce(_ statement: SQLStatement) throws(StoreError) -> OpaquePointer {
        let (sql, parameters) = statement.render(PostgresSyntax())
        // Inside a transaction a reconnect would silently lose the earlier statements.
        if !inTransaction { try ensureConnected() }
        let texts = parameters.map(\.postgresText)
        // libpq reads a parameter up to its first NUL (and PostgreSQL's text has none), so a
        // value holding one would be cut short silently: `shop\0…` would name `shop`.
        guard !texts.contains(where: { $0?.utf8.contains(0) == true }) else {
            throw StoreError.invalidInput("a text value holds a NUL character")
        }
        let name = parameters.count <= maxPreparedParameters ? try preparedName(for: sql, parameterCount: parameters.count) : nil
        let result = withCStrings(texts) { pointers in
            if let name { return PQexecPrepared(connection, name, Int32(pointers.count), pointers, nil, nil, 0) }
            return PQexecParams(connection, sql, Int32(pointers.count), nil, pointers, nil, nil, 0)
        }
        guard let result else { throw lost("no result") }
        let status = PQresultStatus(result)
        if status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK { return result }
        defer { PQclear(result) }
        throw failure(result)
    }

    /// The error a failed result stands for: lost connections and server trouble are
    /// "store unavailable", constraint violations conflicts, the rest database errors.
    private func failure(_ result: OpaquePointer) -> StoreError {
        let sqlState = PQresultErrorField(result, pushfan_pq_diag_sqlstate()).map { String(cString: $0) } ?? ""
        let message = String(cString: PQresultErrorMessage(result)).trimmingCharacters(in: .whitespacesAndNewlines)
        if PQstatus(connection) != CONNECTION_OK { return lost(message) }
        switch sqlState.prefix(2) {
        case "23": return StoreError.conflict(message)
        case "08", "53", "57", "40": return StoreError.unavailable("\(message) (SQLSTATE \(sqlState))")
        default: return StoreError.database("\(message) (SQLSTATE \(sqlState))")
        }
    }

    /// Runs `COPY … FROM STDIN` and sends `data`, rows in COPY's text format; returns the
    /// number of rows copied. The bulk device writer's way in: no statement text grows with
    /// the rows and the server parses them at COPY speed.
    func copyIn(_ sql: String, _ data: [UInt8]) throws(StoreError) -> Int {
        if !inTransaction { try ensureConnected() }
        guard let started = PQexec(connection, sql) else { throw lost("no result") }
        guard PQresultStatus(started) == PGRES_COPY_IN else {
            defer { PQclear(started) }
            throw failure(started)
        }
        PQclear(started)
        let sent = data.withUnsafeBytes { bytes in
            PQputCopyData(connection, bytes.baseAddress?.assumingMemoryBound(to: CChar.self), Int32(bytes.count))
        }
        guard sent == 1, PQputCopyEnd(connection, nil) == 1 else { throw lost(String(cString: PQerrorMessage(connection))) }
        // The COPY's own result, then nil; an error in the data is reported here.
        var copied: Int?
        var error: StoreError?
        while let result = PQgetResult(connection) {
            if PQresultStatus(result) == PGRES_COMMAND_OK {
                copied = Int(String(cString: PQcmdTuples(result)))
            } else if error == nil {
                error = failure(result)
            }
            PQclear(result)
        }
        if let error { throw error }
        guard let copied else { throw lost("no result for COPY") }
        return copied
    }

    /// The name of a prepared statement for `sql`, preparing it on first use.
    private func preparedName(for sql: String, parameterCount: Int) throws(StoreError) -> String? {
        if let name = prepared[sql] { return name }
        if prepared.count >= preparedLimit {
            _ = PQexec(connection, "DEALLOCATE ALL").map { PQclear($0) }
            prepared.removeAll()
        }
        let name = "pushfan_\(prepared.count)"
        guard let result = PQprepare(connection, name, sql, Int32(parameterCount), nil) else { throw lost("no result") }
        defer { PQclear(result) }
        guard PQresultStatus(result) == PGRES_COMMAND_OK else {
            // Let the unprepared path report the error with its SQLSTATE.
            if PQstatus(connection) != CONNECTION_OK { throw lost(String(cString: PQerrorMessage(connection))) }
            return nil
        }
        prepared[sql] = name
        return name
    }

    private func lost(_ message: String) -> StoreError {
        StoreError.unavailable("PostgreSQL connection lost: \(message)")
    }

    @discardableResult
    func execute(_ statement: SQLStatement) throws(StoreError) -> Int {
        let result = try exec(statement)
        defer { PQclear(result) }
        return Int(String(cString: PQcmdTuples(result))) ?? 0
    }

    func query(_ statement: SQLStatement, _ row: (any SQLRow) throws(StoreError) -> Void) throws(StoreError) {
        let result = try exec(statement)
        defer { PQclear(result) }
        let rows = PQntuples(result)
        for index in 0..<rows { try row(PostgresRow(result: result, row: index)) }
    }

    func transaction<T>(_ body: () throws(StoreError) -> T) throws(StoreError) -> T {
        try ensureConnected()
        try execute("BEGIN")
        inTransaction = true
        defer { inTransaction = false }
        do {
            let value = try body()
            try execute("COMMIT")
            return value
        } catch {
            if let connection, PQstatus(connection) == CONNECTION_OK { _ = PQexec(connection, "ROLLBACK").map { PQclear($0) } }
            throw error
        }
    }

    func executeScript(_ sql: String) throws(StoreError) {
        if !inTransaction { try ensureConnected() }
        guard let result = PQexec(connection, sql) else { throw lost("no result") }
        defer { PQclear(result) }
        let status = PQresultStatus(result)
        guard status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK else {
            let message = String(cString: PQresultErrorMessage(result)).trimmingCharacters(in: .whitespacesAndNewlines)
            if PQstatus(connection) != CONNECTION_OK { throw lost(message) }
            throw StoreError.database(message)
        }
    }
}

private struct PostgresRow: SQLRow {
    let result: OpaquePointer
    let row: Int32

    func text(_ column: Int) -> String? {
        guard PQgetisnull(result, row, Int32(column)) == 0, let value = PQgetvalue(result, row, Int32(column)) else { return nil }
        let length = Int(PQgetlength(result, row, Int32(column)))
        return value.withMemoryRebound(to: UInt8.self, capacity: length) { String(decoding: UnsafeBufferPointer(start: $0, count: length), as: UTF8.self) }
    }

    func text(_ column: Int, equals literal: StaticString) -> Bool {
        guard PQgetisnull(result, row, Int32(column)) == 0, let value = PQgetvalue(result, row, Int32(column)) else { return false }
        return Int(PQgetlength(result, row, Int32(column))) == literal.utf8CodeUnitCount && memcmp(value, literal.utf8Start, literal.utf8CodeUnitCount) == 0
    }

    /// Parses the text form's digits in place: scans read a row key per row, and a
    /// `String` for each would cost more than the rest of the row.
    func int(_ column: Int) -> Int64? {
        guard PQgetisnull(result, row, Int32(column)) == 0, let value = PQgetvalue(result, row, Int32(column)) else { return nil }
        return ASCIIInteger.parse(UnsafeRawBufferPointer(start: value, count: Int(PQgetlength(result, row, Int32(column)))))
    }

    func double(_ column: Int) -> Double? { text(column).flatMap { Double($0) } }
}

/// Passes optional strings to C as `const char *const *` for the duration of `body`.
private func withCStrings<R>(_ strings: [String?], _ body: ([UnsafePointer<CChar>?]) -> R) -> R {
    let copies = strings.map { $0.map { strdup($0) } ?? nil }
    defer { for copy in copies { free(copy) } }
    return body(copies.map { $0.map { UnsafePointer($0) } })
}
