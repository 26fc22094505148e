import Foundation
import PushfanMessages
import PushfanSupport

/// One operator call as the log keeps it: who (the credential's kind and name, never a
/// secret), from where, what (method and route pattern, and the ids it named) and how it ended.
package struct OperatorLogEntry: Sendable, Equatable {
    package var sequence: Int64 = 0
    package var at: Int64
    package var actor: String
    package var client: String
    package var action: String
    /// The app the call was about, if any.
    package var app: String?
    /// The other ids the call named (`campaign=spring`, `name=sale`), space-separated.
    package var target: String
    package var status: Int

    /// An entry to append (`at` and `sequence` are the store's when it is written).
    package init(actor: String, client: String, action: String, app: String?, target: String, status: Int, at: Int64 = 0) {
        (self.at, self.actor, self.client, self.action, self.app, self.target, self.status) = (at, actor, client, action, app, target, status)
    }

    /// As the API and `pushfan operator-log` show it.
    package var json: JSONValue {
        .object([
            "seq": .int(sequence), "at": .int(at), "actor": .string(actor), "client": .string(client), "action": .string(action),
            "app": app.map(JSONValue.string) ?? .null, "target": .string(target), "status": .int(Int64(status)),
        ])
    }
}

/// The operator log: an append-only record of the calls that change apps, campaigns,
/// templates and segments. Nothing updates or deletes its rows; entries are read in the
/// order they were written, from a sequence number on.
package struct OperatorLog: Sendable {
    let executor: StoreExecutor
    /// Entries committed together when calls come at once (`GroupCommit`): each transactional
    /// message is an operator call, thousands a second, and a commit of its own per entry
    /// cost as much as the message's campaign row.
    private let appends: GroupCommit<OperatorLogEntry, Void>

    init(executor: StoreExecutor) {
        self.executor = executor
        appends = GroupCommit(executor: executor) { connection, backend, entries, at throws(StoreError) in
            try backend.lockOperatorLog(connection)
            for entry in entries {
                _ = try connection.execute("""
                    INSERT INTO operator_log (at, actor, client, action, app, target, status)
                    VALUES (\(at), \(entry.actor), \(entry.client), \(entry.action), \(.optional(entry.app)), \(entry.target), \(entry.status))
                    """)
            }
            return entries.map { _ in () }
        }
    }

    /// Appends `entry`, stamped with the store's time when its group is written (so within one
    /// process `at` rises with `seq`; across processes, by their clocks and the wait for the
    /// append lock); entries keep the order they came in.
    package func append(_ entry: OperatorLogEntry) async throws(StoreError) {
        try await appends.submit(entry)
    }

    /// Up to `limit` entries after sequence `after`, oldest first; with `app`, only the calls
    /// that named that app.
    package func list(after: Int64 = 0, limit: Int = 100, app: String? = nil) async throws(StoreError) -> [OperatorLogEntry] {
        let forApp: SQLStatement = app.map { " AND app = \($0)" } ?? ""
        return try await executor.run { connection throws(StoreError) in
            try connection.queryAll("""
                SELECT seq, at, actor, client, action, app, target, status FROM operator_log WHERE seq > \(after)
                """ + forApp + " ORDER BY seq LIMIT \(limit)") { row in
                var entry = OperatorLogEntry(
                    actor: row.text(2) ?? "", client: row.text(3) ?? "", action: row.text(4) ?? "", app: row.text(5),
                    target: row.text(6) ?? "", status: Int(row.int(7) ?? 0), at: row.int(1) ?? 0)
                entry.sequence = row.int(0) ?? 0
                return entry
            }
        }
    }
}
