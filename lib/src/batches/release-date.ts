// An episode's exact release instant from its RSS `pubDate`, as the ISO 8601
// string the API's `release_date` carries (spec: "exact date for podcast
// sources"; the runner gives video sources midnight UTC in the same form,
// `Date.toISOString()`).
//
// RSS 2.0 dates are RFC 822 (`Tue, 02 Jan 2024 10:00:00 GMT`), which feeds
// write loosely: the day name left out, a two-digit year, no seconds, a
// numeric zone with a colon, or no zone at all (read as UTC: the server's
// own zone would make the answer depend on where the gateway runs). Some
// feeds write ISO 8601 instead; both are read. Date.parse is not used for
// RFC 822: it reads a zoneless date in the local zone and accepts nonsense.

const MONTHS = ['jan', 'feb', 'mar', 'apr', 'may', 'jun', 'jul', 'aug', 'sep', 'oct', 'nov', 'dec'];

/** Minutes east of UTC of RFC 822's zone names. */
const ZONES: Readonly<Record<string, number>> = {
  UT: 0, UTC: 0, GMT: 0, Z: 0,
  EST: -300, EDT: -240, CST: -360, CDT: -300, MST: -420, MDT: -360, PST: -480, PDT: -420,
};

const ISO = /^(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}):(\d{2})(?::(\d{2})(?:\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?)?$/i;

function zoneOffset(zone: string | undefined): number | undefined {
  if (zone === undefined) return 0;
  const named = ZONES[zone.toUpperCase()];
  if (named !== undefined) return named;
  const m = /^([+-])(\d{2}):?(\d{2})$/.exec(zone);
  if (!m || Number(m[3]) > 59) return undefined;
  return (m[1] === '-' ? -1 : 1) * (Number(m[2]) * 60 + Number(m[3]));
}

/** An instant from calendar fields, or undefined when a field is out of range (no rollover: 30 Feb is not 1 Mar). */
function instant(year: number, month: number, day: number, h: number, min: number, s: number, offsetMin: number): string | undefined {
  if (month < 0 || month > 11 || h > 23 || min > 59 || s > 60) return undefined;
  const local = new Date(Date.UTC(year, month, day, h, min, Math.min(s, 59)));
  if (local.getUTCFullYear() !== year || local.getUTCMonth() !== month || local.getUTCDate() !== day) return undefined;
  return new Date(local.getTime() - offsetMin * 60_000).toISOString();
}

function fromRfc822(text: string): string | undefined {
  const tokens = text.replace(/,/g, ' ').split(/\s+/).filter(Boolean);
  // The day name is optional and says nothing the date does not.
  if (tokens[0] && /^[a-z]+\.?$/i.test(tokens[0]) && !MONTHS.includes(tokens[0].slice(0, 3).toLowerCase())) tokens.shift();
  const [dayText, monthText, yearText, timeText, zone, extra] = tokens;
  if (!dayText || !monthText || !yearText || extra !== undefined) return undefined;
  const month = MONTHS.indexOf(monthText.slice(0, 3).toLowerCase());
  if (!/^\d{1,2}$/.test(dayText) || !/^(?:\d{2}|\d{4})$/.test(yearText) || month === -1) return undefined;
  const time = /^(\d{1,2}):(\d{2})(?::(\d{2}))?$/.exec(timeText ?? '0:00');
  const offset = zoneOffset(zone);
  if (!time || offset === undefined) return undefined;
  const year = yearText.length === 2 ? 2000 + Number(yearText) : Number(yearText);
  return instant(year, month, Number(dayText), Number(time[1]), Number(time[2]), Number(time[3] ?? 0), offset);
}

function fromIso(text: string): string | undefined {
  const m = ISO.exec(text);
  if (!m) return undefined;
  const offset = zoneOffset(m[7]);
  if (offset === undefined) return undefined;
  return instant(Number(m[1]), Number(m[2]) - 1, Number(m[3]), Number(m[4] ?? 0), Number(m[5] ?? 0), Number(m[6] ?? 0), offset);
}

/** `pubDate` as an ISO 8601 instant (`2024-01-02T10:00:00.000Z`), or undefined when it is not a date. */
export function releaseDateOfPubDate(pubDate: string | undefined): string | undefined {
  const text = pubDate?.trim();
  if (!text) return undefined;
  return fromIso(text) ?? fromRfc822(text);
}
