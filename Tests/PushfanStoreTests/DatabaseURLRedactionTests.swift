import Testing

@testable import PushfanStore

/// What logs and errors show of a PostgreSQL URL: never its password.
@Suite struct DatabaseURLRedactionTests {
    @Test("the password goes from the user part and from the password and sslpassword parameters; an unreadable URL shows none of itself", arguments: [
        ("postgres://pushfan:s3cret@db:5432/pushfan", "postgres://pushfan:***@db:5432/pushfan"),
        ("postgresql://pushfan@db/pushfan?sslmode=require&password=s3cret", "postgresql://pushfan@db/pushfan?sslmode=require&password=***"),
        ("postgres://pushfan@db/pushfan?PASSWORD=s3cret", "postgres://pushfan@db/pushfan?PASSWORD=***"),
        ("postgres://pushfan@db/pushfan?sslmode=verify-full&sslpassword=s3cret", "postgres://pushfan@db/pushfan?sslmode=verify-full&sslpassword=***"),
        ("postgres://db/pushfan", "postgres://db/pushfan"),
        ("postgres://pushfan:s3cret@db:port/x y", "(an unreadable database URL)"),
    ])
    func redacts(_ url: String, _ shown: String) {
        #expect(PostgresConnection.redact(url) == shown)
        #expect(!PostgresConnection.redact(url).contains("s3cret"))
    }
}
