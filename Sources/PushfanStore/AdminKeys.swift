import Foundation
import PushfanCrypto
import PushfanMessages
import PushfanSupport

/// What a scoped key may do.
package enum KeyRole: Sendable, Equatable, Hashable {
    /// Everything the admin token may: apps, keys, the operator log, the dashboard.
    case admin
    /// One app's campaigns (submit, list, read, cancel, pause, resume) and its dashboard.
    case campaignsWrite(app: String)
    /// Reads only: the admin routes' GETs, the operator log, every app's dashboard.
    case readOnly

    /// `admin`, `campaigns:write` (with an app), `read-only`.
    package var name: String {
        switch self {
        case .admin: "admin"
        case .campaignsWrite: "campaigns:write"
        case .readOnly: "read-only"
        }
    }

    package var app: String? { if case .campaignsWrite(let app) = self { app } else { nil } }

    package init(name: String, app: String?) throws(StoreError) {
        switch (name, app) {
        case ("admin", nil): self = .admin
        case ("read-only", nil): self = .readOnly
        case ("campaigns:write", let app?):
            try Validation.appKey(app)
            self = .campaignsWrite(app: app)
        case ("campaigns:write", nil): throw StoreError.invalidInput("app: a campaigns:write key is for one app; name it")
        case ("admin", _?), ("read-only", _?): throw StoreError.invalidInput("app: only a campaigns:write key is for one app")
        default: throw StoreError.invalidInput("role: must be admin, campaigns:write or read-only, got '\(Validation.clip(name))'")
        }
    }
}

/// A scoped key as stored (its secret only as a salted hash).
package struct AdminKey: Sendable, Equatable {
    package let id: String
    package let name: String
    package let role: KeyRole
    package let createdAt: Int64
    package let revokedAt: Int64?

    package var json: JSONValue {
        .object([
            "id": .string(id), "name": .string(name), "role": .string(role.name), "app": role.app.map(JSONValue.string) ?? .null,
            "created_at": .int(createdAt), "revoked_at": revokedAt.map(JSONValue.int) ?? .null,
        ])
    }
}

/// Scoped keys for operators and tools: `pfk_<id>_<secret>`, given as `Authorization: Bearer`.
/// The id is public (it names the key in the operator log and in `revoke`); the secret is
/// stored as a salted hash and shown once, when the key is made. A revoked key stays listed
/// and never works again.
package struct AdminKeys: Sendable {
    let executor: StoreExecutor
    package static let prefix = "pfk_"

    /// Makes a key; returns it and the token to hand over (shown once).
    package func add(name: String, role: KeyRole) async throws(StoreError) -> (key: AdminKey, token: String) {
        guard (1...128).contains(name.utf8.count), !Validation.hasControlCharacters(name) else {
            throw StoreError.invalidInput("name: 1 to 128 characters without control characters")
        }
        let id = Crypto.randomBytes(6).map { String(format: "%02x", $0) }.joined()
        let secret = SecretHash.generateSecret()
        let hashed = SecretHash(secret: secret)
        let now = executor.clock.wallMillis
        _ = try await executor.run { connection throws(StoreError) in
            try connection.execute("""
                INSERT INTO admin_keys (id, name, role, app, secret_salt, secret_hash, created_at)
                VALUES (\(id), \(name), \(role.name), \(.optional(role.app)), \(hashed.salt), \(hashed.hash), \(now))
                """)
        }
        return (AdminKey(id: id, name: name, role: role, createdAt: now, revokedAt: nil), Self.prefix + id + "_" + secret)
    }

    /// The key a token names, if it is that key's and not revoked.
    package func verify(_ token: String) async throws(StoreError) -> AdminKey? {
        guard token.hasPrefix(Self.prefix) else { return nil }
        let parts = token.dropFirst(Self.prefix.count).split(separator: "_", maxSplits: 1)
        guard parts.count == 2, parts[0].utf8.count == 12, parts[0].utf8.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x66) }) else { return nil }
        let (id, secret) = (String(parts[0]), String(parts[1]))
        let row = try await executor.run { connection throws(StoreError) in
            try connection.queryOne("SELECT name, role, app, secret_salt, secret_hash, created_at FROM admin_keys WHERE id = \(id) AND revoked_at IS NULL") {
                ($0.text(0) ?? "", $0.text(1) ?? "", $0.text(2), $0.text(3) ?? "", $0.text(4) ?? "", $0.int(5) ?? 0)
            }
        }
        guard let (name, role, app, salt, hash, created) = row, SecretHash(salt: salt, hash: hash).matches(secret) else { return nil }
        return AdminKey(id: id, name: name, role: try KeyRole(name: role, app: app), createdAt: created, revokedAt: nil)
    }

    /// Every key, revoked ones too, oldest first.
    package func list() async throws(StoreError) -> [AdminKey] {
        try await executor.run { connection throws(StoreError) in
            try connection.queryAll("SELECT id, name, role, app, created_at, revoked_at FROM admin_keys ORDER BY created_at, id") { row throws(StoreError) in
                AdminKey(
                    id: row.text(0) ?? "", name: row.text(1) ?? "", role: try KeyRole(name: row.text(2) ?? "", app: row.text(3)),
                    createdAt: row.int(4) ?? 0, revokedAt: row.int(5))
            }
        }
    }

    /// Revokes a key at once; false when there is no such key (or it was revoked before).
    package func revoke(id: String) async throws(StoreError) -> Bool {
        let now = executor.clock.wallMillis
        return try await executor.run { connection throws(StoreError) in
            try connection.execute("UPDATE admin_keys SET revoked_at = \(now) WHERE id = \(id) AND revoked_at IS NULL") == 1
        }
    }
}
