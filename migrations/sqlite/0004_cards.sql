-- The catalogue of installed App Cards, one row per id and version.
CREATE TABLE cards (
    id           TEXT NOT NULL,
    version      TEXT NOT NULL,
    author       TEXT NOT NULL,
    primitives   TEXT NOT NULL,
    integrity    TEXT NOT NULL,
    -- The signed app.json, canonical (RFC 8785) with its sig.
    card_json    TEXT NOT NULL,
    installed_at INTEGER NOT NULL,
    PRIMARY KEY (id, version)
);
