"""The signing path's SQL, as text: one statement per step, named parameters (``:name``), or
positional ones (``?``) where a row comes as a tuple.

The stores in ``signing_store`` run these over the raw DB-API connection of SQLite or
PostgreSQL (rewriting the parameter style for psycopg); nothing here talks to a database.
"""

from __future__ import annotations

from functools import lru_cache

from paysign.policy.caps import LEDGER_MAX
from paysign.store.repositories import SIGNATURE_COLUMNS

#: A key's holder as read, in the order its row is taken apart.
_HOLDER = (
    "k.id", "k.account_id", "k.last_used_at", "w.id", "w.address", "w.sealed_key",
    "p.approval", "p.premium", "p.standard", "p.open_ecosystem", "p.cap_per_payment",
    "p.cap_daily", "p.cap_monthly", "p.frozen", "p.payee_rules", "p.cap_hourly",
)  # fmt: skip
_HOLDER_COLUMNS = ", ".join(_HOLDER)
#: A rule as read with its holder, in the order its row is taken apart.
_RULE = ("kind", "host", "path", "cap_daily", "cap_monthly")
_RULE_COLUMNS = ", ".join(f"r.{column}" for column in _RULE)

_KEY_HOLDER_FROM = """
FROM api_keys k
JOIN wallets w ON w.account_id = k.account_id
LEFT JOIN policies p ON p.account_id = k.account_id"""


def _live_key(key_hash: str, now: str) -> str:
    """The key ``key_hash`` is live at ``now`` (both SQL expressions): unrevoked, unexpired
    and its account not disabled by an operator (an indexed lookup by primary key inside the
    same statement: no round trip of its own)."""
    return f"""k.key_hash = {key_hash} AND k.revoked_at IS NULL AND k.expires_at > {now}
AND EXISTS (SELECT 1 FROM accounts ka WHERE ka.id = k.account_id AND ka.disabled_at IS NULL)"""  # noqa: S608 - this module's own expressions


_LIVE_KEY = _live_key(":key_hash", ":now")


def _holder_read(host_count: int, leading: str = "") -> str:
    """KEY_HOLDER (no hosts) or ``key_holder_with_grants_sql``, ``leading`` columns first."""
    if not host_count:
        return f"SELECT {leading}{_HOLDER_COLUMNS}{_KEY_HOLDER_FROM}\nWHERE {_LIVE_KEY}\n"
    return (
        f"SELECT {leading}{_HOLDER_COLUMNS}, {_RULE_COLUMNS}"
        f"{_KEY_HOLDER_FROM}\nLEFT JOIN policy_rules r ON r.account_id = k.account_id"
        f" AND r.host IN ({_host_placeholders(host_count)})\nWHERE {_LIVE_KEY}\n"
    )


def _host_placeholders(host_count: int) -> str:
    """``:h0, :h1, ...``: the hosts are bound parameters, only these names are interpolated."""
    return ", ".join(f":h{i}" for i in range(host_count))


KEY_HOLDER = _holder_read(0)

# The same row for an account reached without an API key (an OAuth sign-in): no key columns.
ACCOUNT_HOLDER = """
SELECT NULL, a.id, NULL, w.id, w.address, w.sealed_key,
       p.approval, p.premium, p.standard, p.open_ecosystem,
       p.cap_per_payment, p.cap_daily, p.cap_monthly, p.frozen, p.payee_rules, p.cap_hourly
FROM accounts a
JOIN wallets w ON w.account_id = a.id
LEFT JOIN policies p ON p.account_id = a.id
WHERE a.id = :account_id AND a.disabled_at IS NULL
"""

# Reserves the amount in both windows at once, each only if it stays within its cap; a window
# left out of the result refused (and the other is then given back, in the same transaction).
# The cap guards both ways a window can take the amount: a row not yet there is inserted only
# if the amount alone fits, an existing one updated only if its total does. The total is
# compared as "spent <= cap - amount", which cannot overflow; a window without a cap is held
# to the ledger's largest integer.
RESERVE = f"""
INSERT INTO spend_windows (account_id, "window", start, spent)
SELECT :account_id, 'daily', :day_start, :amount
WHERE CAST(:amount AS BIGINT) <= COALESCE(CAST(:daily_cap AS BIGINT), CAST(:amount AS BIGINT))
UNION ALL
SELECT :account_id, 'monthly', :month_start, :amount
WHERE CAST(:amount AS BIGINT) <= COALESCE(CAST(:monthly_cap AS BIGINT), CAST(:amount AS BIGINT))
ON CONFLICT (account_id, "window", start) DO UPDATE SET spent = spend_windows.spent + excluded.spent
WHERE spend_windows.spent <= COALESCE(
    CASE excluded."window" WHEN 'daily' THEN CAST(:daily_cap AS BIGINT)
                          ELSE CAST(:monthly_cap AS BIGINT) END,
    {LEDGER_MAX}) - excluded.spent
RETURNING "window", spent
"""

UNRESERVE = """
UPDATE spend_windows SET spent = spent - :amount
WHERE account_id = :account_id AND "window" = :window AND start = :start
"""

# Creates the account's two windows at 0 if need be, and locks them for the transaction (a
# no-op update on a conflict takes the row lock): what they have spent then stays true until
# the commit.
LOCK_WINDOWS = """
INSERT INTO spend_windows (account_id, "window", start, spent)
VALUES (:account_id, 'daily', :day_start, 0), (:account_id, 'monthly', :month_start, 0)
ON CONFLICT (account_id, "window", start) DO UPDATE SET spent = spend_windows.spent
RETURNING "window", spent
"""

# LOCK_WINDOWS for the holder of a live key, before the holder is known: sent with the key's
# read, it saves the first reservation's round trip. The two SELECTs give no row for a key that
# is unknown, revoked or expired, and then nothing is written.
LOCK_WINDOWS_OF_KEY = f"""
INSERT INTO spend_windows (account_id, "window", start, spent)
SELECT k.account_id, 'daily', :day_start, 0 FROM api_keys k WHERE {_LIVE_KEY}
UNION ALL
SELECT k.account_id, 'monthly', :month_start, 0 FROM api_keys k WHERE {_LIVE_KEY}
ON CONFLICT (account_id, "window", start) DO UPDATE SET spent = spend_windows.spent
RETURNING "window", spent
"""  # noqa: S608 - interpolates this module's own text only

# LOCK_WINDOWS_OF_KEY for all the payers of a batch at once (PostgreSQL), sent before any of
# them is read: their accounts' day and month windows locked in the order of the accounts' ids,
# the one order every batch of every process takes them in. Without it a batch would lock them
# as its payers come, in their keys' order, but an OAuth payer (by account) comes first: two
# processes' batches could each hold an account's windows the other waits for. The payers come
# as one JSON array of {key_hash (hex) or account_id, now, day_start, month_start}; a key that
# is not live locks nothing.
LOCK_PAYERS_WINDOWS = f"""
INSERT INTO spend_windows (account_id, "window", start, spent)
SELECT DISTINCT p.account_id, w.name, w.start, 0
FROM json_to_recordset(CAST(:payers AS JSON))
    AS g (key_hash TEXT, account_id TEXT, now BIGINT, day_start BIGINT, month_start BIGINT)
CROSS JOIN LATERAL (
    SELECT a.id FROM accounts a WHERE a.id = g.account_id
    UNION ALL
    SELECT k.account_id FROM api_keys k WHERE {_live_key("decode(g.key_hash, 'hex')", "g.now")}
) AS p (account_id)
CROSS JOIN LATERAL (VALUES ('daily', g.day_start), ('monthly', g.month_start)) AS w (name, start)
ORDER BY p.account_id, w.name, w.start
ON CONFLICT (account_id, "window", start) DO UPDATE SET spent = spend_windows.spent
"""  # noqa: S608 - interpolates this module's own text only

# The account's hourly window, locked (created at 0) when their policy sets an hourly cap: no
# row otherwise. Sent after LOCK_WINDOWS_OF_KEY, in the order a reservation locks them.
LOCK_HOUR_OF_KEY = f"""
INSERT INTO spend_windows (account_id, "window", start, spent)
SELECT k.account_id, 'hourly', :hour_start, 0
FROM api_keys k JOIN policies p ON p.account_id = k.account_id
WHERE {_LIVE_KEY} AND p.cap_hourly IS NOT NULL
ON CONFLICT (account_id, "window", start) DO UPDATE SET spent = spend_windows.spent
RETURNING spent
"""  # noqa: S608 - interpolates this module's own text only

# The guard repeats the caps the batch checked: the database itself never lets a cap pass.
ADD_SPEND = f"""
UPDATE spend_windows SET spent = spent + :amount
WHERE account_id = :account_id
AND (("window" = 'daily' AND start = :day_start) OR ("window" = 'monthly' AND start = :month_start))
AND spent <= COALESCE(
    CASE "window" WHEN 'daily' THEN CAST(:daily_cap AS BIGINT)
                  ELSE CAST(:monthly_cap AS BIGINT) END,
    {LEDGER_MAX}) - :amount
"""  # noqa: S608 - interpolates a constant only

# PostgreSQL's form of ADD_SPEND for a pipeline, where waiting for its row count would cost a
# round trip: the guard is the same, and a total it refuses fails the statement (a division by
# zero, computed from the rows updated, so never folded into a constant when planned), which
# rolls the whole batch back.
ADD_SPEND_OR_FAIL = (
    f"WITH added AS ({ADD_SPEND.strip()}\nRETURNING 1)\n"
    "SELECT 1 / (CASE WHEN count(*) = 2 THEN 1 ELSE 0 END) FROM added"
)

# The hourly window, written only for an account with an hourly cap (the others never pay a
# statement for it): its row created at 0 if need be and locked — always after the day and
# month rows, the one order every writer takes them in.
LOCK_HOUR = """
INSERT INTO spend_windows (account_id, "window", start, spent)
VALUES (:account_id, 'hourly', :hour_start, 0)
ON CONFLICT (account_id, "window", start) DO UPDATE SET spent = spend_windows.spent
RETURNING spent
"""

# As ADD_SPEND, for the hourly window: the database guards the cap too.
ADD_HOUR_SPEND = """
UPDATE spend_windows SET spent = spent + :amount
WHERE account_id = :account_id AND "window" = 'hourly' AND start = :hour_start
AND spent <= CAST(:hourly_cap AS BIGINT) - :amount
"""

ADD_HOUR_SPEND_OR_FAIL = (
    f"WITH added AS ({ADD_HOUR_SPEND.strip()}\nRETURNING 1)\n"
    "SELECT 1 / (CASE WHEN count(*) = 1 THEN 1 ELSE 0 END) FROM added"
)

# An allow rule's budget windows, for a payment the rule's budget applies to: created at 0 if
# need be and locked, after the account's windows (and the hour's), rules in their text's order.
LOCK_SELLER_WINDOWS = """
INSERT INTO seller_spend_windows (account_id, host, path, "window", start, spent)
VALUES (:account_id, :host, :path, 'daily', :day_start, 0),
       (:account_id, :host, :path, 'monthly', :month_start, 0)
ON CONFLICT (account_id, host, path, "window", start)
DO UPDATE SET spent = seller_spend_windows.spent
RETURNING "window", spent
"""


@lru_cache(maxsize=64)
def lock_budget_windows_of_key_sql(host_count: int) -> str:
    """LOCK_SELLER_WINDOWS for every allow rule with a budget the key's holder has on one of
    ``host_count`` hosts: each rule's two windows locked (created at 0), with the rule."""
    placeholders = _host_placeholders(host_count)
    return (
        'INSERT INTO seller_spend_windows (account_id, host, path, "window", start, spent)\n'
        "SELECT r.account_id, r.host, r.path, w.name, w.start, 0\n"
        "FROM api_keys k JOIN policy_rules r ON r.account_id = k.account_id\n"
        "CROSS JOIN (VALUES ('daily', CAST(:day_start AS BIGINT)),"
        " ('monthly', CAST(:month_start AS BIGINT))) AS w (name, start)\n"
        f"WHERE {_LIVE_KEY} AND r.kind = 'allow' AND r.host IN ({placeholders})\n"
        "AND (r.cap_daily IS NOT NULL OR r.cap_monthly IS NOT NULL)\n"
        "ORDER BY r.host, r.path, w.name\n"
        'ON CONFLICT (account_id, host, path, "window", start)\n'
        "DO UPDATE SET spent = seller_spend_windows.spent\n"
        'RETURNING host, path, "window", spent\n'
    )


# As ADD_SPEND, for an allow rule's budget windows: the database guards the rule's caps too.
ADD_SELLER_SPEND = f"""
UPDATE seller_spend_windows SET spent = spent + :amount
WHERE account_id = :account_id AND host = :host AND path = :path
AND (("window" = 'daily' AND start = :day_start) OR ("window" = 'monthly' AND start = :month_start))
AND spent <= COALESCE(
    CASE "window" WHEN 'daily' THEN CAST(:daily_cap AS BIGINT)
                  ELSE CAST(:monthly_cap AS BIGINT) END,
    {LEDGER_MAX}) - :amount
"""  # noqa: S608 - interpolates a constant only

ADD_SELLER_SPEND_OR_FAIL = (
    f"WITH added AS ({ADD_SELLER_SPEND.strip()}\nRETURNING 1)\n"
    "SELECT 1 / (CASE WHEN count(*) = 2 THEN 1 ELSE 0 END) FROM added"
)

_SIGNATURE_COLUMN_LIST = ", ".join(SIGNATURE_COLUMNS)

# A signature's values come as one tuple in ``SIGNATURE_COLUMNS`` order: positional parameters.
INSERT_SIGNATURE = (
    f"INSERT INTO signatures ({_SIGNATURE_COLUMN_LIST})\n"
    f"VALUES ({', '.join('?' for _ in SIGNATURE_COLUMNS)})"
)

COPY_SIGNATURES = f"COPY signatures ({_SIGNATURE_COLUMN_LIST}) FROM STDIN"


# A batch's signatures in one statement (PostgreSQL), as one JSON array of rows (each keyed by
# SIGNATURE_COLUMNS, bytes in PostgreSQL's text form): unlike COPY, it goes in the same flush as
# the batch's other writes and its COMMIT; and one JSON text costs the client less than half the
# CPU of one typed array per column (``bench/signature_insert.py``).
INSERT_SIGNATURES_FROM_JSON = (
    f"INSERT INTO signatures ({_SIGNATURE_COLUMN_LIST})\nSELECT {_SIGNATURE_COLUMN_LIST}\n"
    "FROM json_populate_recordset(CAST(NULL AS signatures), CAST(? AS JSON))"
)

TOUCH_KEY = "UPDATE api_keys SET last_used_at = :now WHERE id = :key_id"

INSERT_REFUSAL = """
INSERT INTO refusals (account_id, api_key_id, seller_host, seller_path, network, amount, sandbox,
    reason, rule, detail, created_at)
VALUES (:account_id, :api_key_id, :seller_host, :seller_path, :network, :amount, :sandbox,
    :reason, :rule, :detail, :created_at)
"""

#: The refusals the holder is told about (``services.notifications``).
NOTIFIED_REFUSALS = frozenset({"allow-pending", "spend-cap-exceeded"})

#: The most notifications of one kind an account is sent in an hour, whatever the sellers.
MAX_NOTIFICATIONS_PER_HOUR = 20

# Queued only for an account with somewhere to send it, once an hour per seller and kind, and
# at most MAX_NOTIFICATIONS_PER_HOUR of a kind: an agent retrying a refused payment, or making
# up a new seller path for each, must not flood its holder (every refusal stays in the activity).
INSERT_NOTIFICATION = f"""
INSERT INTO notification_outbox (account_id, event, seller_host, seller_path, amount, detail,
    created_at, fanned_out)
SELECT CAST(:account_id AS VARCHAR), CAST(:reason AS VARCHAR), CAST(:seller_host AS VARCHAR),
    CAST(:seller_path AS VARCHAR), CAST(:amount AS BIGINT), CAST(:detail AS VARCHAR),
    CAST(:created_at AS BIGINT), false
WHERE EXISTS (SELECT 1 FROM notification_targets
    WHERE account_id = CAST(:account_id AS VARCHAR))
AND NOT EXISTS (SELECT 1 FROM notification_outbox
    WHERE account_id = CAST(:account_id AS VARCHAR) AND event = CAST(:reason AS VARCHAR)
    AND seller_host = CAST(:seller_host AS VARCHAR) AND seller_path = CAST(:seller_path AS VARCHAR)
    AND created_at > CAST(:created_at AS BIGINT) - 3600)
AND (SELECT count(*) FROM notification_outbox
    WHERE account_id = CAST(:account_id AS VARCHAR) AND event = CAST(:reason AS VARCHAR)
    AND created_at > CAST(:created_at AS BIGINT) - 3600) < {MAX_NOTIFICATIONS_PER_HOUR}
"""  # noqa: S608 - interpolates this module's own constant only


@lru_cache(maxsize=64)
def key_holder_with_grants_sql(host_count: int) -> str:
    """The key holder's row once per rule of theirs on one of ``host_count`` hosts (the rule's
    kind, host and path last), or once with those three NULL: one round trip for both reads
    that every request makes first."""
    return _holder_read(host_count)


@lru_cache(maxsize=64)
def grants_sql(host_count: int) -> str:
    placeholders = _host_placeholders(host_count)
    return (
        f"SELECT {', '.join(_RULE)} FROM policy_rules "  # noqa: S608
        f"WHERE account_id = :account_id AND host IN ({placeholders})"
    )


# Everything a batch reads of a key's holder (but when the key was last used) and of their
# rules on the hosts, as one digest: a batch that runs on what an earlier one read sends
# ``GUARD_HOLDERS_UNCHANGED``, and any change since fails it (``known_payers``). PostgreSQL
# only; the columns go through one text form, NULLs included. Derived from the holder's
# columns, so that a column added to what is read is in the digest too.
_FINGERPRINT_COLUMNS = ", ".join(column for column in _HOLDER if column != "k.last_used_at")


def _fingerprint(hosts_match: str | None) -> str:
    """The digest; ``hosts_match``: how a rule's host is matched to the hosts asked about
    (``IN (...)``, ``= ANY(...)``), ``None`` when none were. No rule on them digests as no
    hosts asked about."""
    text = f"CAST(ROW({_FINGERPRINT_COLUMNS}) AS TEXT)"
    if hosts_match is not None:
        rule = f"CAST(ROW({_RULE_COLUMNS}) AS TEXT)"
        rules = (
            f"SELECT string_agg({rule}, ',' ORDER BY r.kind, r.host, r.path)"  # noqa: S608
            f" FROM policy_rules r WHERE r.account_id = k.account_id AND r.host {hosts_match}"
        )
        text += f" || COALESCE(({rules}), '')"
    return f"sha256(convert_to({text}, 'UTF8'))"


def _hosts_in(host_count: int) -> str | None:
    return f"IN ({_host_placeholders(host_count)})" if host_count else None


@lru_cache(maxsize=64)
def fingerprinted_holder_sql(host_count: int) -> str:
    """The holder's digest, then what ``key_holder_with_grants_sql`` (or, with no hosts,
    KEY_HOLDER) reads: one statement, so the digest is of what was read."""
    return _holder_read(host_count, f"{_fingerprint(_hosts_in(host_count))}, ")


# Fails (a division by zero) unless each key of ``:guards`` is live at its moment and its
# holder's digest on its hosts is still the one given: a JSON array of one object per key (its
# hash and the digest in hex, the moment, the hosts asked about). One statement whatever the
# number of payers: a statement each cost the client and the server more than the check.
GUARD_HOLDERS_UNCHANGED = f"""
WITH guard AS (
    SELECT * FROM json_to_recordset(CAST(:guards AS JSON))
    AS g (key_hash TEXT, now BIGINT, hosts TEXT[], fingerprint TEXT)
)
SELECT 1 / (CASE WHEN count(*) = (SELECT count(*) FROM guard) THEN 1 ELSE 0 END)
FROM guard g
JOIN api_keys k ON {_live_key("decode(g.key_hash, 'hex')", "g.now")}
JOIN wallets w ON w.account_id = k.account_id
LEFT JOIN policies p ON p.account_id = k.account_id
WHERE {_fingerprint("= ANY(g.hosts)")} = decode(g.fingerprint, 'hex')
"""  # noqa: S608 - interpolates this module's own text only
