/** A `%…%` LIKE/ILIKE pattern matching `text` literally (its `%`, `_` and `\` escaped). */
export function containsPattern(text: string): string {
  return `%${text.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
}
