-- Hosted App Card runs (ADR 0029): the package files an install had, the
-- app principal of each card id, the runs, and each app's memory and
-- coordination registers.

-- The files of an installed card version, as verified at install.
CREATE TABLE card_files (
    card_id  TEXT NOT NULL,
    version  TEXT NOT NULL,
    path     TEXT NOT NULL,
    content  BLOB NOT NULL,
    PRIMARY KEY (card_id, version, path),
    FOREIGN KEY (card_id, version) REFERENCES cards (id, version)
);

-- One app principal per card id, made by the first run.
CREATE TABLE hosted_apps (
    card_id    TEXT PRIMARY KEY NOT NULL,
    app_id     TEXT NOT NULL UNIQUE,
    created_at INTEGER NOT NULL
);

CREATE TABLE app_runs (
    id             TEXT PRIMARY KEY NOT NULL,
    card_id        TEXT NOT NULL,
    version        TEXT NOT NULL,
    app_id         TEXT NOT NULL REFERENCES principals (id),
    state          TEXT NOT NULL CHECK (state IN ('starting', 'running', 'exited', 'failed')),
    reason         TEXT,
    exit_code      INTEGER,
    isolated       INTEGER NOT NULL CHECK (isolated IN (0, 1)),
    stop_requested INTEGER NOT NULL DEFAULT 0 CHECK (stop_requested IN (0, 1)),
    created_at     INTEGER NOT NULL,
    ended_at       INTEGER,
    -- stdout and stderr, capped at hosted.output_max_bytes; written at the end.
    log            BLOB
);
CREATE INDEX app_runs_card ON app_runs (card_id, created_at);

-- `remember`/`recall`: one app's key-value memory.
CREATE TABLE app_memory (
    app_id     TEXT NOT NULL REFERENCES principals (id),
    key        TEXT NOT NULL,
    value      TEXT NOT NULL,
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (app_id, key)
);

-- `coord`: one app's compare-and-set registers.
CREATE TABLE app_coord (
    app_id  TEXT NOT NULL REFERENCES principals (id),
    key     TEXT NOT NULL,
    value   TEXT NOT NULL,
    version INTEGER NOT NULL,
    PRIMARY KEY (app_id, key)
);
