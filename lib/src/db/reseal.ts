// The re-seal command's work (api-gateway/src/admin.ts `reseal`): every
// sealed column of every table (./sealed-columns.ts) brought to the current
// format (v2, bound to its place) under the first key of SECRET_KEYS, so an
// old key can be removed and no v1 value is left to be moved between rows.
// Safe beside running services: each batch reads a page of rows not yet
// current, and each row is written back only if its value is still the one
// read (a writer that changed it meanwhile sealed the new value itself).
// Idempotent and resumable: values already current are never selected, so
// a second run, or one after an interruption, finds only what is left.
import type pg from 'pg';
import { SecretBoxError, type SecretBox } from '../secret-box.js';
import { SEALED_COLUMNS, type SealedColumn } from './sealed-columns.js';

/** What one column's pass did. */
export interface ResealCount {
  table: string;
  column: string;
  /** Values written again in the current format under the current key. */
  resealed: number;
  /** Values changed by another writer between the read and the write: left to that writer. */
  changed: number;
  /** Values no configured key opens at their place (a removed key, a moved or damaged value): left as they are. */
  unreadable: number;
}

export interface ResealOptions {
  /** Rows read and written per statement. */
  batchSize?: number;
  /** Only these columns ("table.column"); default every sealed column. */
  only?: readonly string[];
  /** Called after each column's pass, for progress output. */
  onColumn?: (count: ResealCount) => void;
}

/** Re-seal every sealed column; the counts per table and column, in SEALED_COLUMNS' order. */
export async function resealAll(pool: pg.Pool, box: SecretBox, opts: ResealOptions = {}): Promise<ResealCount[]> {
  const counts: ResealCount[] = [];
  for (const c of SEALED_COLUMNS) {
    if (opts.only && !opts.only.includes(`${c.table}.${c.column}`)) continue;
    const count = await resealColumn(pool, box, c, opts.batchSize ?? 500);
    opts.onColumn?.(count);
    counts.push(count);
  }
  return counts;
}

type Row = Record<string, string | null> & { k: string; v: string };

async function resealColumn(pool: pg.Pool, box: SecretBox, c: SealedColumn, batchSize: number): Promise<ResealCount> {
  const count: ResealCount = { table: c.table, column: c.column, resealed: 0, changed: 0, unreadable: 0 };
  // Identifiers come from SEALED_COLUMNS, never from input.
  const fields = [`${c.key}::text AS k`, `${c.column} AS v`, ...c.fields.map((f) => `${f}::text AS ${f}`)].join(', ');
  const page = (after: boolean) => `SELECT ${fields} FROM ${c.table}
    WHERE ${c.column} IS NOT NULL AND NOT starts_with(${c.column}, $1)${after ? ` AND ${c.key} > $3::${c.keyType}` : ''}
    ORDER BY ${c.key} LIMIT $2`;
  const update = `UPDATE ${c.table} t SET ${c.column} = u.new
      FROM unnest($1::${c.keyType}[], $2::text[], $3::text[]) AS u(k, old, new)
     WHERE t.${c.key} = u.k AND t.${c.column} = u.old`;
  let after: string | undefined;
  for (;;) {
    const rows = (await pool.query<Row>(page(after !== undefined), [box.currentPrefix(), batchSize, ...(after !== undefined ? [after] : [])])).rows;
    if (!rows.length) return count;
    after = rows[rows.length - 1]!.k;
    const done: { k: string; old: string; next: string }[] = [];
    for (const r of rows) {
      const at = c.at({ ...r, [c.key]: r.k });
      try {
        done.push({ k: r.k, old: r.v, next: box.seal(box.open(r.v, at), at) });
      } catch (err) {
        if (!(err instanceof SecretBoxError)) throw err;
        count.unreadable++;
      }
    }
    if (!done.length) continue;
    const r = await pool.query(update, [done.map((d) => d.k), done.map((d) => d.old), done.map((d) => d.next)]);
    count.resealed += r.rowCount ?? 0;
    count.changed += done.length - (r.rowCount ?? 0);
  }
}
