-- +goose Up

-- Reviewers where they are (issue 13): notification targets, the outbox
-- their deliveries are made from, escalation steps and reviewer groups.

-- A notification target an admin configured. The secret (a webhook's
-- signing key, a Slack URL is a secret itself) never leaves the server:
-- every API answer and page shows it redacted.
CREATE TABLE notify_targets (
    name          text PRIMARY KEY CHECK (name ~ '^[a-z0-9][a-z0-9._-]{0,63}$'),
    kind          text NOT NULL CHECK (kind IN ('slack', 'webhook', 'email')),
    url           text NOT NULL DEFAULT '',
    secret        text NOT NULL DEFAULT '',
    recipients    text[] NOT NULL DEFAULT '{}',
    allow_private text[] NOT NULL DEFAULT '{}',
    created_by    text NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now()
);

-- One notification to deliver, written in the transaction of the change it
-- tells of (a submit that made an action pending, an escalation step, the
-- decision). A deliverer of any instance claims due rows with FOR UPDATE
-- SKIP LOCKED, moving next_at past its attempt (a claim that is never
-- answered is due again then: nothing is lost on a restart).
CREATE TABLE notify_outbox (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    action_id    uuid NOT NULL REFERENCES actions (id) ON DELETE CASCADE,
    target       text NOT NULL,
    event        text NOT NULL CHECK (event IN ('action.pending', 'action.escalated', 'action.decided')),
    step         integer NOT NULL DEFAULT 0,
    status       text NOT NULL DEFAULT 'queued' CHECK (status IN ('queued', 'delivered', 'failed')),
    attempts     integer NOT NULL DEFAULT 0,
    next_at      timestamptz NOT NULL DEFAULT now(),
    last_error   text NOT NULL DEFAULT '',
    created_at   timestamptz NOT NULL DEFAULT now(),
    delivered_at timestamptz
);
CREATE INDEX notify_outbox_due ON notify_outbox (next_at) WHERE status = 'queued';
CREATE INDEX notify_outbox_action ON notify_outbox (action_id, id);

-- Every delivery attempt, for the action page.
CREATE TABLE notify_attempts (
    outbox_id   bigint NOT NULL REFERENCES notify_outbox (id) ON DELETE CASCADE,
    n           integer NOT NULL CHECK (n > 0),
    at          timestamptz NOT NULL DEFAULT now(),
    ok          boolean NOT NULL,
    status_code integer NOT NULL DEFAULT 0,
    error       text NOT NULL DEFAULT '',
    PRIMARY KEY (outbox_id, n)
);

-- Who is told and who may approve a pending action, and when that
-- widens. Step 0 is the rule's own reviewers and notify targets, fired at
-- submit; steps 1.. are its escalation steps (and the fleet's reminder at
-- half the timeout), each fired once by the scheduler (fired_at IS NULL is
-- the compare-and-set). Only actions whose rule or fleet configured any of
-- this have rows: the submit of any other writes nothing here.
CREATE TABLE action_routes (
    action_id uuid NOT NULL REFERENCES actions (id) ON DELETE CASCADE,
    step      integer NOT NULL CHECK (step >= 0),
    after_ms  bigint NOT NULL DEFAULT 0,
    due_at    timestamptz NOT NULL,
    notify    text[] NOT NULL DEFAULT '{}',
    reviewers text[] NOT NULL DEFAULT '{}',
    reminder  boolean NOT NULL DEFAULT false,
    fired_at  timestamptz,
    PRIMARY KEY (action_id, step)
);
CREATE INDEX action_routes_due ON action_routes (due_at) WHERE fired_at IS NULL;

-- Reviewer groups: a rule's reviewers names them.
CREATE TABLE reviewer_groups (
    name       text PRIMARY KEY CHECK (name ~ '^[a-z0-9][a-z0-9._-]{0,63}$'),
    created_by text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
);

-- A group's members. source says who manages the membership: "local"
-- (an admin, through the API or console) or an identity provider's name
-- ("oidc"), whose logins replace that source's memberships of the user.
CREATE TABLE reviewer_group_members (
    group_name text NOT NULL REFERENCES reviewer_groups (name) ON DELETE CASCADE,
    username   text NOT NULL REFERENCES users (username) ON DELETE CASCADE,
    source     text NOT NULL DEFAULT 'local',
    PRIMARY KEY (group_name, username)
);
CREATE INDEX reviewer_group_members_user ON reviewer_group_members (lower(username));

-- +goose Down
DROP TABLE reviewer_group_members;
DROP TABLE reviewer_groups;
DROP TABLE action_routes;
DROP TABLE notify_attempts;
DROP TABLE notify_outbox;
DROP TABLE notify_targets;
