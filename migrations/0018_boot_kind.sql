-- What kind of process each boot was: `serve` (the daemon: Studio, bots, the scheduler) or `local`
-- (`clawvisor chat` and other terminal runtimes: agents only, no Studio, no scheduler). Operator
-- commands call the API only of a running `serve`; a running `local` process still holds the
-- database (restore refuses). Older rows were all daemons as far as anyone can tell.
ALTER TABLE daemon_boots ADD COLUMN kind TEXT NOT NULL DEFAULT 'serve';
