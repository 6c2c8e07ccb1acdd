-- MCP tasks (the Tasks extension, io.modelcontextprotocol/tasks): an
-- execute call that answered at once with a task handle, and what became
-- of its Run. Any replica answers tasks/get from here; a finished task's
-- result survives a restart. `result` is the tools/call result (JSON) once
-- the Run ended; `runner` and `heartbeat_at` say which replica runs a
-- working task and when it last said so (a silent runner's task fails).
CREATE TABLE tasks (
    task_id TEXT PRIMARY KEY,
    tenant TEXT NOT NULL,
    subject TEXT NOT NULL,
    tool TEXT NOT NULL,
    status TEXT NOT NULL,
    status_message TEXT,
    result TEXT,
    cancel_requested BIGINT NOT NULL DEFAULT 0,
    runner TEXT NOT NULL,
    heartbeat_at BIGINT NOT NULL,
    ttl_ms BIGINT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL
);
CREATE INDEX tasks_by_owner ON tasks (tenant, subject, created_at);
