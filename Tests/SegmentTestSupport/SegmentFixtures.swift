import Foundation
import PushfanSegments
import PushfanSupport
import PushfanTestSupport

/// Short constructors for expected ASTs.
package enum Seg {
    package static func tag(_ name: String) -> SegmentExpression { .term(.tag(name)) }

    package static func text(_ field: SegmentTextField, _ op: SegmentComparison, _ value: String) -> SegmentExpression {
        .term(.text(field, .compare(op, value)))
    }

    package static func text(_ field: SegmentTextField, in values: [String]) -> SegmentExpression {
        .term(.text(field, .oneOf(values)))
    }

    package static func version(_ field: SegmentVersionField, _ op: SegmentComparison, _ value: String) -> SegmentExpression {
        .term(.version(field, .compare(op, SegmentVersion(value)!)))
    }

    package static func version(_ field: SegmentVersionField, in values: [String]) -> SegmentExpression {
        .term(.version(field, .oneOf(values.map { SegmentVersion($0)! })))
    }

    package static func attr(_ key: String, _ op: SegmentComparison, _ value: SegmentAttributeValue) -> SegmentExpression {
        .term(.attribute(key: key, .compare(op, value)))
    }

    package static func attr(_ key: String, in values: [SegmentAttributeValue]) -> SegmentExpression {
        .term(.attribute(key: key, .oneOf(values)))
    }

    package static func seen(_ amount: Int64, _ unit: SegmentDuration.Unit) -> SegmentExpression {
        .term(.seenWithin(SegmentDuration(amount: amount, unit: unit)!))
    }
}

package typealias SegmentFixtureRandom = SeededGenerator


/// A row of the device table: the segment-visible fields plus what the store
/// filters on before the segment (app, status).
package struct SegmentFixtureRow: Sendable {
    package let rowKey: Int64
    package let app: String
    package let status: String
    package let device: SegmentDevice
    /// Whether `attributes` is stored as NULL rather than as a JSON object.
    package let nullAttributes: Bool
}

package enum SegmentFixtures {
    /// The evaluation moment of every fixture test.
    package static let now: Int64 = 1_700_000_000_000
    package static let day: Int64 = 86_400_000

    /// Users' aliases (table `user_aliases`): app, user, name, value. Another app's alias of
    /// the same user, a user no device names, ids that differ only in case or look like SQL,
    /// and a user id written as text whose devices hold it as a number.
    package static let aliases: [(app: String, user: String, name: String, value: String)] = [
        ("app1", "u1", "crm_id", "C-1"), ("app1", "u1", "email", "u1@example.com"), ("app1", "U1", "crm_id", "C-1b"),
        ("app1", "u2", "crm_id", "C-2"), ("app1", "' OR 1=1 --", "crm_id", "x' OR 1=1 --"), ("app1", "5", "crm_id", "C-5"),
        ("app1", "ghost", "crm_id", "C-9"), ("app2", "u2", "crm_id", "C-1"),
    ]

    /// About 300 devices with every kind of value the language distinguishes:
    /// missing fields, versions that need numeric ordering or have no key,
    /// attributes of each JSON kind, tags that differ only in case or Unicode
    /// normalisation, hostile-looking text, and last-seen times on the edges of
    /// the windows the expressions use.
    package static let rows: [SegmentFixtureRow] = {
        var random = SegmentFixtureRandom(seed: 0x5E6_3E47)
        let tags = ["sports", "news", "quoted name", "' OR 1=1 --", "\u{E9}", "e\u{301}", "Sports"]
        let locales: [String?] = ["de_DE", "de_AT", "en_US", "fr_FR", "de_CH", nil]
        let timezones: [String?] = ["Europe/Berlin", "America/New_York", "Asia/Tokyo", nil]
        let appVersions: [String?] = ["2.3", "2.3.0", "2.9", "2.10", "2.10.1", "3.0", "17.4.1", "2.3-beta", "1.0.0.1", nil]
        let osVersions: [String?] = ["16.7", "17.0", "17.4", "17.4.1", "18", "17.4.1.2", "x", nil]
        let plans: [JSONValue?] = ["free", "pro", "Free", 5, true, nil, .null]
        let ages: [JSONValue?] = [17, 18, 30, 18.5, "18", nil]
        let scores: [JSONValue?] = [0.5, -2.5, 1000, .number(1000), -3, nil]
        let dotted: [JSONValue?] = ["x", "y", nil]
        let betas: [JSONValue?] = [true, false, "true", nil]
        let bigs: [JSONValue?] = [.int(9_007_199_254_740_993), .number(9_007_199_254_740_992), .int(-1), nil]
        // A number is refused as a user id now; rows written before that may still hold one.
        let users: [JSONValue?] = ["u1", "u2", "U1", "' OR 1=1 --", 5, nil]
        let edges: [Int64] = [0, 1, -1, -30 * day, -30 * day + 1, -30 * day - 1, -14 * day, -36 * 3_600_000, -3_600_000]

        var rows: [SegmentFixtureRow] = []
        for index in 1...300 {
            var attributes: [String: JSONValue] = [:]
            for (key, pool) in [("plan", plans), ("age", ages), ("score", scores), ("a.b", dotted), ("beta", betas), ("big", bigs), ("user_id", users)] {
                if let value = random.pick(pool) { attributes[key] = value }
            }
            let lastSeen = random.chance(15)
                ? now + random.pick(edges)
                : now - Int64(random.below(60 * 24)) * 3_600_000 - Int64(random.below(3_600_000))
            var device = SegmentDevice(
                tags: Set(tags.filter { _ in random.chance(30) }),
                locale: random.pick(locales),
                timezone: random.pick(timezones),
                environment: random.chance(30) ? "sandbox" : "production",
                appVersion: random.pick(appVersions),
                osVersion: random.pick(osVersions),
                attributes: attributes,
                lastSeenAt: lastSeen)
            let app = random.chance(90) ? "app1" : "app2"
            let status = random.chance(85) ? "active" : "invalid"
            if case .string(let user)? = attributes["user_id"] {
                for alias in aliases where alias.app == app && alias.user == user { device.userAliases[alias.name] = alias.value }
            }
            rows.append(SegmentFixtureRow(
                rowKey: Int64(index), app: app, status: status, device: device, nullAttributes: attributes.isEmpty && random.chance(50)))
        }
        return rows
    }()

    /// Row keys the store query would return, by the reference evaluator.
    package static func expectedRowKeys(_ expression: SegmentExpression) -> [Int64] {
        rows.filter { $0.app == "app1" && $0.status == "active" && SegmentEvaluator.matches(expression, device: $0.device, now: now) }
            .map(\.rowKey)
    }

    /// Valid expressions covering every field, operator and combination, used by
    /// the compiler tests and compared against SQLite.
    package static let expressions: [String] = [
        "tag:sports",
        "not tag:sports",
        "tag:\"quoted name\" or tag:news",
        "tag:\"' OR 1=1 --\"",
        "tag:\"\u{E9}\"",
        "tag:Sports and not tag:sports",
        "locale = de_DE",
        "locale != de_DE",
        "not locale = de_DE",
        "locale in (de_DE, de-AT)",
        "not locale in (de_DE, de_AT, en_US)",
        "timezone = Europe/Berlin or timezone = \"Asia/Tokyo\"",
        "timezone != America/New_York",
        "environment = sandbox",
        "environment != production and tag:news",
        "app_version >= 2.3",
        "app_version = 2.3",
        "app_version > 2.9",
        "app_version < 2.10",
        "app_version <= 2.10.0",
        "app_version != 2.3",
        "not app_version >= 2.3",
        "app_version in (2.3, 17.4.1, 3)",
        "os_version >= 17.4",
        "os_version < 17 or os_version > 17.4.1",
        "attr.plan = \"free\"",
        "attr.plan = free",
        "attr.plan != free",
        "attr.plan in (free, pro)",
        "attr.plan = 5",
        "attr.plan > \"F\"",
        "attr.plan < \"a\"",
        "attr.age >= 18",
        "attr.age > 18.2",
        "attr.age = \"18\"",
        "attr.age in (17, 18.5, \"18\")",
        "not attr.age < 18",
        "attr.score <= -2.5 or attr.score >= 1e3",
        "attr.score = 1000",
        "attr.beta = true",
        "attr.beta != true",
        "attr.beta in (true, \"true\", 1)",
        "attr.a.b = x",
        "attr.big > 9007199254740992",
        "attr.big = 9007199254740992.0",
        "attr.missing != 1",
        "last_seen within 30d",
        "not last_seen within 2w",
        "last_seen within 36h and not last_seen within 60m",
        "tag:sports and locale in (de_DE, de_AT) and app_version >= 2.3 and not attr.plan = \"free\" and last_seen within 30d",
        "(tag:news or tag:sports) and not (locale = de_DE or environment = sandbox)",
        "not (not tag:news and not (attr.plan = pro or app_version < 2.10))",
        "attr.nothing = 1 or not attr.nothing = 1",
        "user:u1",
        "user:u1 or user:\"' OR 1=1 --\"",
        "not user:u2 and tag:sports",
        "user:5 or user:u2",
        "attr.user_id = u1 and not user:U1",
        "alias.crm_id:C-1",
        "alias.crm_id:\"x' OR 1=1 --\"",
        "alias.crm_id:C-5 or tag:news",
        "alias.email:\"u1@example.com\" or alias.crm_id:C-2",
        "not alias.crm_id:C-1 and tag:sports",
        "alias.crm_id:C-9 or alias.crm_id:nobody or user:u2",
        "alias.crm_id:C-1b and not alias.crm_id:C-1",
    ]
}

