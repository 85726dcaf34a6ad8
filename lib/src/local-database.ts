// Where local mode's embedded PostgreSQL listens and how it is reached
// (scripts/local-postgres.ts starts it): shared with the admin CLI, which
// works against it when DATABASE_URL is not set, so `npm run admin` needs no
// settings next to `make run`. The password is no secret: the server
// listens on 127.0.0.1 only, for a development database.
export const LOCAL_PG_USER = 'mediajobs';
export const LOCAL_PG_PASSWORD = 'mediajobs-local';
export const LOCAL_PG_DEFAULT_PORT = 54329;

/** The URL of local mode's database on `port` (EMBEDDED_PG_PORT). */
export function localDatabaseUrl(port: number): string {
  return `postgres://${LOCAL_PG_USER}:${LOCAL_PG_PASSWORD}@127.0.0.1:${port}/mediajobs`;
}
