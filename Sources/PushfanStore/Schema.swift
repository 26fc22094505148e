import PushfanMessages

/// Versioned schema migrations, applied in order on start. A migration is never edited
/// once released; changes come as a new version.
enum Schema {
    struct Migration {
        let version: Int
        let summary: String
        let sqlite: String
        let postgres: String

        /// A migration each dialect says in its own way: 15 (the log's sequence), 23 and 28
        /// (a JSON member), 27 (SQLite's devices numbered anew; nothing to do on PostgreSQL);
        /// the first shares all but its device tables (`firstTables`).
        init(version: Int, summary: String, sqlite: String, postgres: String) {
            (self.version, self.summary, self.sqlite, self.postgres) = (version, summary, sqlite, postgres)
        }

        /// One text, the same in both dialects.
        init(version: Int, summary: String, both text: String) {
            self.init(version: version, summary: summary, sqlite: text, postgres: text)
        }

        /// One text for both dialects, in each one's `Words`.
        init(version: Int, summary: String, _ text: (Words) -> String) {
            self.init(version: version, summary: summary, sqlite: text(.sqlite), postgres: text(.postgres))
        }
    }

    /// Where the dialects' table definitions differ, once per dialect. Migrations 1 to 9
    /// are written in these words (the first says only its device tables apart); most later
    /// ones are one text for both (BIGINT has SQLite's integer affinity too, and PostgreSQL
    /// has no rowid to leave out).
    struct Words {
        /// A 64-bit integer column.
        let int64: String
        /// After a table whose primary key is its whole identity.
        let withoutRowID: String
        /// A 64-bit key the database numbers itself: SQLite's row id (kept by VACUUM, as an
        /// INTEGER PRIMARY KEY; the highest one is given again once its row is deleted),
        /// PostgreSQL's sequence.
        let numberedKey: String

        static let sqlite = Words(int64: "INTEGER", withoutRowID: " WITHOUT ROWID", numberedKey: "INTEGER PRIMARY KEY")
        static let postgres = Words(int64: "BIGINT", withoutRowID: "", numberedKey: "BIGSERIAL PRIMARY KEY")
    }

    /// PostgreSQL hash partitions of the device table (see docs/store.md to grow it).
    static let devicePartitions = 8

    /// Migration 1 in each dialect's words; only the devices and their tags (`devices`) are
    /// said apart: SQLite's row id against PostgreSQL's sequence and hash partitions.
    private static func firstTables(_ words: Words, devices: String) -> String {
        """
        CREATE TABLE apps (
            app TEXT PRIMARY KEY,
            secret_salt TEXT NOT NULL,
            secret_hash TEXT NOT NULL,
            topic TEXT NOT NULL,
            team_id TEXT, key_id TEXT, key_file TEXT,
            cert_file TEXT, cert_key_file TEXT,
            environment TEXT NOT NULL,
            rate_per_second \(words.int64) NOT NULL,
            created_at \(words.int64) NOT NULL
        );
        \(devices)
        CREATE INDEX device_tags_by_tag ON device_tags (tag, row_key);
        CREATE TABLE segments (
            app TEXT NOT NULL, name TEXT NOT NULL, expression TEXT NOT NULL, created_at \(words.int64) NOT NULL,
            PRIMARY KEY (app, name)
        );
        CREATE TABLE campaigns (
            id TEXT PRIMARY KEY, app TEXT NOT NULL, status TEXT NOT NULL,
            audience \(words.int64), shards \(words.int64), created_at \(words.int64) NOT NULL, updated_at \(words.int64) NOT NULL
        );
        CREATE TABLE deliveries (
            campaign TEXT NOT NULL, row_key \(words.int64) NOT NULL, device_id TEXT NOT NULL,
            state TEXT NOT NULL, attempts INTEGER NOT NULL DEFAULT 0,
            apns_id TEXT, status INTEGER, reason TEXT,
            claimed_by TEXT, lease_until \(words.int64) NOT NULL DEFAULT 0,
            claimed_at \(words.int64) NOT NULL, finished_at \(words.int64),
            PRIMARY KEY (campaign, row_key)
        )\(words.withoutRowID);
        CREATE INDEX deliveries_by_state ON deliveries (campaign, state);
        """
    }

    /// The columns both dialects' device tables share, after the row key.
    private static func deviceColumns(_ words: Words, json: String) -> String {
        """
            app TEXT NOT NULL,
            device_id TEXT NOT NULL,
            token TEXT NOT NULL,
            environment TEXT NOT NULL,
            locale TEXT, timezone TEXT,
            app_version TEXT, app_version_key TEXT,
            os_version TEXT, os_version_key TEXT,
            attributes \(json) NOT NULL DEFAULT '{}',
            created_at \(words.int64) NOT NULL,
            last_seen_at \(words.int64) NOT NULL,
            status TEXT NOT NULL DEFAULT 'active',
            invalid_reason TEXT,
            invalid_at \(words.int64),
        """
    }

    private static let sqliteDevices = """
        CREATE TABLE devices (
            row_key INTEGER PRIMARY KEY,
        \(deviceColumns(.sqlite, json: "TEXT"))
            UNIQUE (app, device_id),
            UNIQUE (app, environment, token)
        );
        CREATE INDEX devices_by_app ON devices (app, row_key);
        CREATE TABLE device_tags (
            app TEXT NOT NULL,
            row_key INTEGER NOT NULL REFERENCES devices (row_key) ON DELETE CASCADE,
            tag TEXT NOT NULL,
            PRIMARY KEY (row_key, tag)
        ) WITHOUT ROWID;
        """

    private static let postgresDevices = """
        CREATE SEQUENCE devices_row_key_seq;
        CREATE TABLE devices (
            row_key BIGINT NOT NULL DEFAULT nextval('devices_row_key_seq'),
        \(deviceColumns(.postgres, json: "JSONB"))
            PRIMARY KEY (app, row_key),
            UNIQUE (app, device_id),
            UNIQUE (app, environment, token)
        ) PARTITION BY HASH (app);
        \((0..<devicePartitions).map { "CREATE TABLE devices_p\($0) PARTITION OF devices FOR VALUES WITH (MODULUS \(devicePartitions), REMAINDER \($0));" }.joined(separator: "\n"))
        -- No foreign key here: a key check per tag row made imports five times
        -- slower; the store deletes a device's tags together with the device.
        CREATE TABLE device_tags (
            app TEXT NOT NULL,
            row_key BIGINT NOT NULL,
            tag TEXT NOT NULL,
            PRIMARY KEY (row_key, tag)
        );
        """

    static let migrations: [Migration] = [
        Migration(
            version: 1, summary: "apps, devices, tags, segments, campaigns, delivery ledger",
            sqlite: firstTables(.sqlite, devices: sqliteDevices), postgres: firstTables(.postgres, devices: postgresDevices)),
        Migration(version: 2, summary: "campaign definitions and finished tasks, for the workers") { words in
            """
            ALTER TABLE campaigns ADD COLUMN definition TEXT;
            CREATE TABLE campaign_tasks (
                campaign TEXT NOT NULL, shard \(words.int64) NOT NULL, finished_at \(words.int64) NOT NULL,
                PRIMARY KEY (campaign, shard)
            )\(words.withoutRowID);
            """
        },
        Migration(version: 3, summary: "running outcome totals per campaign, for progress without scanning the ledger") { words in
            """
            CREATE TABLE campaign_counts (
                campaign TEXT NOT NULL, state TEXT NOT NULL, count \(words.int64) NOT NULL,
                PRIMARY KEY (campaign, state)
            )\(words.withoutRowID);
            """
        },
        Migration(version: 4, summary: "APNs provider tokens shared by the workers signing with one key") { words in
            """
            CREATE TABLE provider_tokens (
                team_id TEXT NOT NULL, key_id TEXT NOT NULL, jwt TEXT NOT NULL, issued_at \(words.int64) NOT NULL,
                PRIMARY KEY (team_id, key_id)
            )\(words.withoutRowID);
            """
        },
        Migration(version: 5, summary: "scheduled campaigns: their send_at, and when a worker dispatched them") { words in
            """
            ALTER TABLE campaigns ADD COLUMN send_at \(words.int64);
            ALTER TABLE campaigns ADD COLUMN dispatched_at \(words.int64);
            CREATE INDEX campaigns_parked ON campaigns (send_at) WHERE send_at IS NOT NULL AND dispatched_at IS NULL;
            """
        },
        Migration(version: 6, summary: "local time and quiet hours: apps' default zone, devices' quiet hours, parked waves of tasks") { words in
            """
            ALTER TABLE apps ADD COLUMN time_zone TEXT;
            ALTER TABLE devices ADD COLUMN quiet_start INTEGER;
            ALTER TABLE devices ADD COLUMN quiet_end INTEGER;
            CREATE TABLE campaign_waves (
                campaign TEXT NOT NULL, wave TEXT NOT NULL, send_at \(words.int64) NOT NULL,
                first_shard \(words.int64) NOT NULL, shards \(words.int64) NOT NULL, lane \(words.int64),
                zones TEXT, row_keys TEXT, skip TEXT, dispatched_at \(words.int64), produced_at \(words.int64),
                PRIMARY KEY (campaign, wave)
            )\(words.withoutRowID);
            CREATE INDEX campaign_waves_parked ON campaign_waves (send_at) WHERE produced_at IS NULL;
            """
        },
        Migration(version: 7, summary: "an application secret per app beside its master secret, for the HTTP API") { _ in
            """
            ALTER TABLE apps ADD COLUMN app_secret_salt TEXT;
            ALTER TABLE apps ADD COLUMN app_secret_hash TEXT;
            """
        },
        Migration(
            version: 8, summary: "idempotency keys of API requests and the answers they got; a rotated secret's predecessor and its grace period"
        ) { words in
            """
            ALTER TABLE apps ADD COLUMN previous_secret_salt TEXT;
            ALTER TABLE apps ADD COLUMN previous_secret_hash TEXT;
            ALTER TABLE apps ADD COLUMN previous_secret_until \(words.int64);
            ALTER TABLE apps ADD COLUMN previous_app_secret_salt TEXT;
            ALTER TABLE apps ADD COLUMN previous_app_secret_hash TEXT;
            ALTER TABLE apps ADD COLUMN previous_app_secret_until \(words.int64);
            CREATE TABLE api_idempotency (
                app TEXT NOT NULL, key TEXT NOT NULL, request_sha256 TEXT NOT NULL,
                status INTEGER NOT NULL, response TEXT, location TEXT, created_at \(words.int64) NOT NULL,
                PRIMARY KEY (app, key)
            )\(words.withoutRowID);
            CREATE INDEX api_idempotency_age ON api_idempotency (created_at);
            """
        },
        Migration(version: 9, summary: "devices as client SDKs describe them (the Notificare-compatible calls)") { words in
            """
            CREATE TABLE sdk_devices (
                app TEXT NOT NULL, device_id TEXT NOT NULL, document TEXT NOT NULL, updated_at \(words.int64) NOT NULL,
                PRIMARY KEY (app, device_id)
            )\(words.withoutRowID);
            """
        },
        Migration(
            version: 10, summary: "the live dashboard's tallies per results partition with their offsets, and recent dead letters",
            both: dashboardTables),
        Migration(
            version: 11, summary: "running totals of final outcomes per A/B variant",
            both: variantCounts),
        Migration(
            version: 12, summary: "an app's default notification category",
            both: "ALTER TABLE apps ADD COLUMN default_category TEXT;"),
        Migration(
            version: 13, summary: "apps' frequency caps, and the alert pushes each device was admitted to under them",
            both: frequencyCaps),
        Migration(
            version: 14, summary: "apps' stored notification templates, and the copy a campaign was planned with",
            both: templates),
        Migration(
            version: 15, summary: "the operator log: every call that changes apps, campaigns, templates or segments",
            sqlite: "CREATE TABLE operator_log (seq INTEGER PRIMARY KEY AUTOINCREMENT, \(operatorLogColumns));\n\(operatorLogIndex)",
            postgres: "CREATE TABLE operator_log (seq BIGSERIAL PRIMARY KEY, \(operatorLogColumns));\n\(operatorLogIndex)"),
        Migration(
            version: 16, summary: "scoped keys for operators and tools (admin, campaigns:write for one app, read-only), stored hashed",
            both: adminKeys),
        Migration(
            version: 17, summary: "campaign ids named within their app: every campaign column holds <app>/<id>",
            both: campaignsWithinApps),
        Migration(
            version: 18, summary: "devices' tokens of other kinds than alert (VoIP, Live Activity, widgets…), each with its own state",
            both: deviceTokens),
        Migration(
            version: 19, summary: "engagement events: each event id once per app, and per campaign, variant and kind the events, devices and values",
            both: engagement),
        Migration(
            version: 20, summary: "apps' broadcast channels (iOS 18) as APNs made them, with their environment and message storage policy",
            both: broadcastChannels),
        Migration(
            version: 21, summary: "Live Activity tokens by attributes type, and update tokens' activity attributes, for campaigns that pick activities by them",
            both: activityAttributes),
        Migration(
            version: 22, summary: "engagement events by time, for forgetting the ids of events too old to be counted",
            both: "CREATE INDEX engagement_events_by_at ON engagement_events (at);"),
        Migration(
            version: 23, summary: "users: devices by their user_id attribute, and users' aliases (crm_id, email…)",
            sqlite: users(userOfDevice: "json_extract(attributes, '$.user_id')"), postgres: users(userOfDevice: PostgresSyntax.user(of: "attributes"))),
        Migration(
            version: 24, summary: "frequency caps counted per user: each admitted push names its device's user",
            both: userCounts),
        Migration(
            version: 25, summary: "the saved segment's expression a campaign was accepted with, frozen like its template",
            both: "ALTER TABLE campaigns ADD COLUMN segment TEXT;"),
        Migration(
            version: 26, summary: "engagement's distinct devices as (group number, device row) pairs instead of five texts a row",
            engagementDevicesByNumber),
        Migration(
            version: 27, summary: "SQLite numbers devices without ever giving a removed device's row key again",
            sqlite: sqliteDevicesNumberedOnce,
            postgres: "SELECT 1; -- the devices' sequence never gives a row key twice"),
        Migration(
            version: 28, summary: "the user an SDK's device document names, so a user's erasure and export find a temporary device's too",
            sqlite: sdkDocumentUsers(userOfDocument: "json_extract(document, '$.userID')"),
            postgres: sdkDocumentUsers(userOfDocument: "(replace(document, '\\u0000', '\\ufffd')::json ->> 'userID')")),
        Migration(
            version: 29, summary: "conversions' devices counted once across currencies: the pairs counted before, under the conversions of every currency too",
            both: conversionDevicesAcrossCurrencies),
    ]

    /// Migration 29, the same on both databases. A conversion's device is counted once per
    /// (campaign, variant) across currencies, in the group of detail "" (`EngagementRows`);
    /// devices counted before, under their currency's group only, are put there too, so that
    /// converting again after the upgrade does not count them again.
    private static let conversionDevicesAcrossCurrencies = """
        INSERT INTO engagement_groups (campaign, variant, kind, detail)
            SELECT DISTINCT campaign, variant, kind, '' FROM engagement_groups WHERE kind = 'converted' AND detail <> ''
            ORDER BY campaign, variant
            ON CONFLICT (campaign, variant, kind, detail) DO NOTHING;
        INSERT INTO engagement_group_devices (group_id, row_key)
            SELECT DISTINCT every.id, x.row_key FROM engagement_groups g
            JOIN engagement_group_devices x ON x.group_id = g.id
            JOIN engagement_groups every ON every.campaign = g.campaign AND every.variant = g.variant AND every.kind = g.kind AND every.detail = ''
            WHERE g.kind = 'converted' AND g.detail <> ''
            ON CONFLICT (group_id, row_key) DO NOTHING;
        """

    /// Migration 28. A temporary device (the SDK's, before it has an APNs token) has no
    /// device row to name its user, only its document: the column the API writes with the
    /// document names it, filled here from the documents written before. PostgreSQL's JSON
    /// functions refuse a `\u0000` escape, which the API's encoder writes for a NUL in any
    /// text of a document: read as `\ufffd` instead (an escape for an escape, so the text
    /// stays JSON), so that no document can stop the migration.
    private static func sdkDocumentUsers(userOfDocument: String) -> String {
        """
        ALTER TABLE sdk_devices ADD COLUMN user_id TEXT;
        UPDATE sdk_devices SET user_id = \(userOfDocument);
        CREATE INDEX sdk_devices_by_user ON sdk_devices (app, user_id) WHERE user_id IS NOT NULL;
        """
    }

    /// Migration 27, SQLite's devices table again with AUTOINCREMENT. Without it SQLite gave
    /// the highest row key again once that device was removed, and whatever still named the
    /// key passed to the next new device: its ledger and engagement rows, a quiet-hours hold
    /// or a message task's recipients (a push meant for one person sent to another's phone).
    /// Migrations run inside one transaction with foreign keys on, so dropping the old table
    /// deletes the tags (ON DELETE CASCADE): they wait in a table of their own meanwhile (in
    /// the file, not in memory, where temporary tables live). The numbering starts above every
    /// row key a table still names (a quiet-hours hold's list too), so a key removed before
    /// this migration is not given again either.
    private static let sqliteDevicesNumberedOnce = """
        CREATE TABLE devices_numbered (
            row_key INTEGER PRIMARY KEY AUTOINCREMENT,
        \(deviceColumns(.sqlite, json: "TEXT"))
            quiet_start INTEGER,
            quiet_end INTEGER,
            UNIQUE (app, device_id),
            UNIQUE (app, environment, token)
        );
        INSERT INTO devices_numbered SELECT * FROM devices ORDER BY row_key;
        CREATE TABLE device_tags_kept AS SELECT * FROM device_tags;
        DROP TABLE devices;
        ALTER TABLE devices_numbered RENAME TO devices;
        INSERT INTO device_tags SELECT * FROM device_tags_kept ORDER BY row_key, tag;
        DROP TABLE device_tags_kept;
        INSERT INTO sqlite_sequence (name, seq) SELECT 'devices', 0 WHERE NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'devices');
        UPDATE sqlite_sequence SET seq = max(seq,
            (SELECT coalesce(max(row_key), 0) FROM deliveries), (SELECT coalesce(max(row_key), 0) FROM device_tokens),
            (SELECT coalesce(max(row_key), 0) FROM frequency_sends), (SELECT coalesce(max(row_key), 0) FROM engagement_group_devices),
            (SELECT coalesce(max(CAST(j.value AS INTEGER)), 0) FROM campaign_waves w, json_each('[' || w.row_keys || ']') j
              WHERE w.row_keys IS NOT NULL AND w.row_keys <> ''))
            WHERE name = 'devices';
        CREATE INDEX devices_by_app ON devices (app, row_key);
        \(usersIndex(userOfDevice: "json_extract(attributes, '$.user_id')"))
        """

    /// Migration 26. A device that did something counted once per (campaign, variant, kind,
    /// detail): the group by a number (`engagement_groups`) and the device by its row, two
    /// integers in one B-tree instead of five texts in two (143 bytes a device in
    /// scripts/bench-events' store). Rows of devices removed since have no row to point at
    /// and are dropped; the counts keep them.
    private static func engagementDevicesByNumber(_ words: Words) -> String {
        """
        CREATE TABLE engagement_groups (
            id \(words.numberedKey),
            campaign TEXT NOT NULL, variant TEXT NOT NULL, kind TEXT NOT NULL, detail TEXT NOT NULL,
            UNIQUE (campaign, variant, kind, detail)
        );
        INSERT INTO engagement_groups (campaign, variant, kind, detail)
            SELECT campaign, variant, kind, detail FROM engagement_counts ORDER BY campaign, variant, kind, detail;
        CREATE TABLE engagement_group_devices (
            group_id \(words.int64) NOT NULL, row_key \(words.int64) NOT NULL,
            PRIMARY KEY (group_id, row_key)
        )\(words.withoutRowID);
        INSERT INTO engagement_group_devices (group_id, row_key)
            SELECT g.id, d.row_key FROM engagement_devices e
            JOIN engagement_groups g ON g.campaign = e.campaign AND g.variant = e.variant AND g.kind = e.kind AND g.detail = e.detail
            JOIN campaigns c ON c.id = e.campaign
            JOIN devices d ON d.app = c.app AND d.device_id = e.device
            ORDER BY g.id, d.row_key;
        DROP TABLE engagement_devices;
        """
    }

    /// Migration 24, the same on both databases: `<app>/<user>` of the device when the push
    /// was admitted under caps counted per user (`FrequencyLedger`).
    private static let userCounts = """
        ALTER TABLE frequency_sends ADD COLUMN user_key TEXT;
        CREATE INDEX frequency_sends_by_user ON frequency_sends (user_key) WHERE user_key IS NOT NULL;
        """

    private static func usersIndex(userOfDevice: String) -> String {
        "CREATE INDEX devices_by_user ON devices (app, \(userOfDevice)) WHERE \(userOfDevice) IS NOT NULL;"
    }

    /// Migration 23. A device's user stays its `user_id` attribute (one truth, which segments
    /// and imports already speak); the index makes "the devices of user U" a lookup. Its
    /// expression is the one `SQLSyntax.deviceUser` writes in queries.
    private static func users(userOfDevice: String) -> String {
        """
        \(usersIndex(userOfDevice: userOfDevice))
        CREATE TABLE user_aliases (
            app TEXT NOT NULL, name TEXT NOT NULL, value TEXT NOT NULL, user_id TEXT NOT NULL, created_at BIGINT NOT NULL,
            PRIMARY KEY (app, name, value)
        );
        CREATE INDEX user_aliases_by_user ON user_aliases (app, user_id);
        """
    }

    /// Migration 21, the same on both databases. The attributes are a JSON object of strings
    /// kept as text; PostgreSQL reads a member with a cast, SQLite with json_extract.
    private static let activityAttributes = """
        ALTER TABLE device_tokens ADD COLUMN attributes_type TEXT;
        ALTER TABLE device_tokens ADD COLUMN attributes TEXT;
        UPDATE device_tokens SET attributes_type = scope WHERE kind = 'liveactivity_start';
        CREATE INDEX device_tokens_by_attributes_type ON device_tokens (app, kind, attributes_type, row_key, scope);
        """

    /// Migration 20, the same on both databases.
    private static let broadcastChannels = """
        CREATE TABLE broadcast_channels (
            app TEXT NOT NULL, channel_id TEXT NOT NULL, environment TEXT NOT NULL, storage_policy TEXT NOT NULL, created_at BIGINT NOT NULL,
            PRIMARY KEY (app, channel_id)
        );
        """

    /// Migration 19, the same on both databases (`DOUBLE PRECISION` is SQLite's REAL).
    private static let engagement = """
        CREATE TABLE engagement_events (
            app TEXT NOT NULL, id TEXT NOT NULL, campaign TEXT, kind TEXT NOT NULL, at BIGINT NOT NULL, counted_at BIGINT NOT NULL,
            PRIMARY KEY (app, id)
        );
        CREATE TABLE engagement_counts (
            campaign TEXT NOT NULL, variant TEXT NOT NULL, kind TEXT NOT NULL, detail TEXT NOT NULL,
            events BIGINT NOT NULL, devices BIGINT NOT NULL, value DOUBLE PRECISION NOT NULL,
            PRIMARY KEY (campaign, variant, kind, detail)
        );
        CREATE TABLE engagement_devices (
            campaign TEXT NOT NULL, variant TEXT NOT NULL, kind TEXT NOT NULL, detail TEXT NOT NULL, device TEXT NOT NULL,
            PRIMARY KEY (campaign, variant, kind, detail, device)
        );
        """

    /// Migration 18, the same on both databases. A device's alert token stays its row's own.
    private static let deviceTokens = """
        CREATE TABLE device_tokens (
            app TEXT NOT NULL, row_key BIGINT NOT NULL, kind TEXT NOT NULL, scope TEXT NOT NULL,
            token TEXT NOT NULL, environment TEXT NOT NULL, created_at BIGINT NOT NULL, last_seen_at BIGINT NOT NULL,
            expires_at BIGINT, status TEXT NOT NULL, invalid_reason TEXT, invalid_at BIGINT,
            PRIMARY KEY (row_key, kind, scope)
        );
        CREATE INDEX device_tokens_by_token ON device_tokens (app, kind, environment, token);
        """

    /// Migration 17, the same on both databases. Ids were unique across apps until now, so
    /// each row's app is its campaign's; the campaigns row moves last, after every table
    /// that names it has found its app through it. Rows of no known campaign stay as they
    /// are (none are written; a hand-made one is left for an operator to see).
    private static let campaignsWithinApps = ["deliveries", "campaign_tasks", "campaign_counts", "campaign_waves", "campaign_variant_counts", "frequency_sends", "dashboard_tallies", "dashboard_campaigns"]
        .map { table in
            "UPDATE \(table) SET campaign = (SELECT c.app FROM campaigns c WHERE c.id = \(table).campaign) || '/' || campaign WHERE campaign IN (SELECT id FROM campaigns);"
        }.joined(separator: "\n") + "\nUPDATE campaigns SET id = app || '/' || id;"

    /// Migration 16, the same on both databases.
    private static let adminKeys = """
        CREATE TABLE admin_keys (
            id TEXT PRIMARY KEY, name TEXT NOT NULL, role TEXT NOT NULL, app TEXT,
            secret_salt TEXT NOT NULL, secret_hash TEXT NOT NULL, created_at BIGINT NOT NULL, revoked_at BIGINT
        );
        """

    /// Migration 15's columns (the sequence is each dialect's own).
    private static let operatorLogColumns = """
        at BIGINT NOT NULL, actor TEXT NOT NULL, client TEXT NOT NULL, action TEXT NOT NULL, app TEXT, target TEXT NOT NULL, status INTEGER NOT NULL
        """
    private static let operatorLogIndex = "CREATE INDEX operator_log_by_app ON operator_log (app, seq);"

    /// Migration 14, the same on both databases.
    private static let templates = """
        CREATE TABLE app_templates (
            app TEXT NOT NULL, name TEXT NOT NULL, definition TEXT NOT NULL, updated_at BIGINT NOT NULL,
            PRIMARY KEY (app, name)
        );
        ALTER TABLE campaigns ADD COLUMN template TEXT;
        """

    /// Migration 13, the same on both databases.
    private static let frequencyCaps = """
        ALTER TABLE apps ADD COLUMN frequency_caps TEXT;
        CREATE TABLE frequency_sends (
            row_key BIGINT NOT NULL, campaign TEXT NOT NULL, sent_at BIGINT NOT NULL,
            PRIMARY KEY (row_key, campaign)
        );
        """

    /// Migration 11, the same on both databases.
    private static let variantCounts = """
        CREATE TABLE campaign_variant_counts (
            campaign TEXT NOT NULL, variant TEXT NOT NULL, state TEXT NOT NULL, count BIGINT NOT NULL,
            PRIMARY KEY (campaign, variant, state)
        );
        """

    /// Migration 10, the same on both databases.
    private static let dashboardTables = """
                CREATE TABLE dashboard_offsets (
                    topic TEXT NOT NULL, kafka_partition INTEGER NOT NULL, next_offset BIGINT NOT NULL,
                    PRIMARY KEY (topic, kafka_partition)
                );
                CREATE TABLE dashboard_tallies (
                    topic TEXT NOT NULL, kafka_partition INTEGER NOT NULL, campaign TEXT NOT NULL, tally TEXT NOT NULL,
                    PRIMARY KEY (topic, kafka_partition, campaign)
                );
                CREATE INDEX dashboard_tallies_by_campaign ON dashboard_tallies (campaign);
                CREATE TABLE dashboard_campaigns (campaign TEXT PRIMARY KEY, updated_at BIGINT NOT NULL, saved_at BIGINT NOT NULL);
                CREATE INDEX dashboard_campaigns_recent ON dashboard_campaigns (updated_at);
                CREATE TABLE dashboard_dead_letters (
                    topic TEXT NOT NULL, kafka_partition INTEGER NOT NULL, kafka_offset BIGINT NOT NULL, record TEXT NOT NULL, at BIGINT NOT NULL,
                    PRIMARY KEY (topic, kafka_partition, kafka_offset)
                );
                CREATE INDEX dashboard_dead_letters_recent ON dashboard_dead_letters (at);
        """

    /// Brings the database to the newest version; returns the versions applied now.
    /// Concurrent starters are serialised by the write transaction (SQLite) or an
    /// advisory lock (PostgreSQL), so each migration runs once.
    static func migrate(_ connection: SQLConnection, _ backend: any SQLBackend, now: Int64) throws(StoreError) -> [Int] {
        try connection.executeScript("CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, applied_at BIGINT NOT NULL)")
        return try connection.transaction { () throws(StoreError) -> [Int] in
            try backend.lockMigrations(connection)
            let applied = Set(try connection.queryAll("SELECT version FROM schema_migrations") { Int($0.int(0) ?? 0) })
            var newlyApplied: [Int] = []
            for migration in migrations where !applied.contains(migration.version) {
                try connection.executeScript(backend.script(of: migration))
                try connection.execute("INSERT INTO schema_migrations (version, applied_at) VALUES (\(migration.version), \(now))")
                newlyApplied.append(migration.version)
            }
            return newlyApplied
        }
    }

    static var latestVersion: Int { migrations.map(\.version).max() ?? 0 }
}
