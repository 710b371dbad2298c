-- MCP stdio servers the daemon started, so that a daemon killed with SIGKILL can reap their process
-- groups at its next boot. A row lives from the spawn to the link's orderly stop. `token` is also
-- in the child's environment (CLAWVISOR_MCP_TOKEN): a process is killed at boot only when it
-- carries it, so a recycled pid never hits a stranger.
CREATE TABLE mcp_processes (
    token       TEXT    PRIMARY KEY,
    server      TEXT    NOT NULL,
    pid         INTEGER NOT NULL,
    pgid        INTEGER NOT NULL,
    started_ms  INTEGER NOT NULL
);
