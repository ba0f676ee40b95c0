import { describe, expect, it } from 'vitest';
import { QUERY_DATES_MAX, queryDates } from '../../src/memory/retrieval/query-dates.ts';

describe('queryDates: the calendar dates a question names', () => {
  it('reads a month, a month of a year, a year alone, and a day as its month', () => {
    expect(queryDates('When did Melanie go camping in June?')).toEqual([{ month: 6 }]);
    expect(queryDates('What did they paint in July 2023?')).toEqual([{ month: 7, year: 2023 }]);
    expect(queryDates('What painting was shown on October 13, 2023?')).toEqual([{ month: 10, year: 2023 }]);
    expect(queryDates('Which trips happened during 2022?')).toEqual([{ year: 2022 }]);
    expect(queryDates('From March to AUGUST')).toEqual([{ month: 3 }, { month: 8 }]);
  });

  it('reads "may" as a month only where a date reads so, and leaves relative dates alone', () => {
    expect(queryDates('What may cause the delay?')).toEqual([]);
    expect(queryDates('the one I painted last May')).toEqual([{ month: 5 }]);
    expect(queryDates('May 2023 and May 7')).toEqual([{ month: 5, year: 2023 }, { month: 5 }]);
    expect(queryDates('What did she do yesterday or last week?')).toEqual([]);
    expect(queryDates('Mayhem in Junebug street, room 12345')).toEqual([]);
  });

  it('keeps distinct dates, at most QUERY_DATES_MAX', () => {
    expect(queryDates('June, june 2023, June')).toEqual([{ month: 6 }, { month: 6, year: 2023 }]);
    expect(queryDates('1990 1991 1992 1993 1994 1995')).toHaveLength(QUERY_DATES_MAX);
  });
});
