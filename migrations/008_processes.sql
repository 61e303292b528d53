-- One row per running worker process (memoryd serve, or a replay working its
-- own jobs), keyed by its River client id: the id River appends to
-- river_job.attempted_by when the process takes a job. The process renews
-- heartbeat_at every few seconds while it runs. A row whose heartbeat is
-- older than the process timeout belongs to a process that is gone (SIGKILL,
-- OOM, host lost): a live process deletes the row and hands the dead
-- process's running extraction jobs to new jobs at once, instead of leaving
-- them to River's rescuer (2 x --job-timeout). See worker/recover.go.
CREATE TABLE memoryd_processes (
    id           text        PRIMARY KEY,
    started_at   timestamptz NOT NULL DEFAULT now(),
    heartbeat_at timestamptz NOT NULL DEFAULT now()
);

-- The reconciler (worker/reconcile.go) looks for pending turns that no live
-- job names; the pending ones are few next to the processed ones.
CREATE INDEX turns_pending_idx ON turns (received_at) WHERE status = 'pending';
