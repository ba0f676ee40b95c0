/**
 * The calendar dates a search query names ("camping in June", "in July 2023", "during 2022"), read
 * so that keyword search can prefer facts observed then (keyword.ts; DESIGN §5 "Conversations",
 * docs/decisions/0106-conversation-context.md). A question about a conversation names when
 * something happened far more often than the turn that tells it does: the turn says "we went
 * camping last week", its `observedAt` says June.
 *
 * What is read: an English month name, with an optional day and year after it ("October 13,
 * 2023"), or a year alone (1900–2099). "May" is a month only where a date reads so ("in May",
 * "last May", "May 2023", "May 7"), not the verb ("what may cause…"). Relative dates ("last
 * week", "yesterday") are left alone: they are relative to when the question is asked, which a
 * search does not know. The day is not used: measured on LoCoMo's dev split, matching the day as
 * well lost what the month gained.
 */

/** A month (1–12) of any year, a month of one year, or a whole year. */
export interface QueryDate {
  month?: number;
  year?: number;
}

/** At most this many dates are read from a query (each adds a condition to the search). */
export const QUERY_DATES_MAX = 4;

const MONTHS = ['january', 'february', 'march', 'april', 'may', 'june', 'july', 'august', 'september', 'october', 'november', 'december'];
const MONTH = new RegExp(
  String.raw`(?<before>\b(?:in|last|this|next|early|late|mid|of|since|until|before|after|during|from|by)\s+)?\b(?<month>${MONTHS.join('|')})\b(?:\s+(?<day>\d{1,2})(?:st|nd|rd|th)?\b)?(?:,?\s+(?<year>(?:19|20)\d{2})\b)?`,
  'gi',
);
const YEAR = /\b(?:19|20)\d{2}\b/g;

export function queryDates(query: string): QueryDate[] {
  const dates: QueryDate[] = [];
  const add = (date: QueryDate) => {
    if (dates.length >= QUERY_DATES_MAX || dates.some((d) => d.month === date.month && d.year === date.year)) return;
    dates.push(date);
  };
  const claimed: [number, number][] = [];
  for (const match of query.matchAll(MONTH)) {
    const { before, month, day, year } = match.groups!;
    const index = MONTHS.indexOf(month!.toLowerCase());
    // "may" is a verb unless the words around it make it a date.
    if (month!.toLowerCase() === 'may' && !before && !day && !year) continue;
    add({ month: index + 1, ...(year ? { year: Number(year) } : {}) });
    claimed.push([match.index!, match.index! + match[0].length]);
  }
  for (const match of query.matchAll(YEAR)) {
    if (claimed.some(([from, to]) => match.index! >= from && match.index! < to)) continue;
    add({ year: Number(match[0]) });
  }
  return dates;
}
