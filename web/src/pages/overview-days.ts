/** Local midnight `daysAgo` days before the day of `now` (a negative `daysAgo` is a day ahead). */
export function dayStart(daysAgo: number, now: Date = new Date()): Date {
  const d = new Date(now);
  d.setHours(0, 0, 0, 0);
  d.setDate(d.getDate() - daysAgo);
  return d;
}

/** One local day as the inclusive bounds the stats API filters on (`from`, `to`). */
export interface DayWindow {
  /** Its local midnight. */
  start: Date;
  /** 1 ms before the next day's local midnight. */
  end: Date;
}

/**
 * The last `days` local days up to the day of `now`, oldest first, as the Overview's per-day chart
 * asks `/api/logs/stats` for them. Each ends 1 ms before the next one starts: a day of a daylight
 * saving change lasts 23 or 25 h, and a window of a fixed 24 h left an hour out of every bar on the
 * 25 h day and counted one twice on the 23 h day (review finding, time 3).
 */
export function dayWindows(days: number, now: Date = new Date()): DayWindow[] {
  return Array.from({ length: days }, (_, i) => {
    const daysAgo = days - 1 - i;
    return {
      start: dayStart(daysAgo, now),
      end: new Date(dayStart(daysAgo - 1, now).getTime() - 1),
    };
  });
}
