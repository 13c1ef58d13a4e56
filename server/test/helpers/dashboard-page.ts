import type { Page } from 'playwright-core';

/**
 * On the dashboard's Templates page (already open in `page`): creates a template named `name` with
 * `subject` through the "New template" dialog, and waits until the page shows its subject.
 */
export async function createTemplateInDialog(page: Page, name: string, subject: string): Promise<void> {
  await page.getByRole('button', { name: 'New template' }).click();
  const dialog = page.getByRole('dialog');
  await dialog.getByRole('textbox', { name: 'Name', exact: true }).fill(name);
  await dialog.getByLabel('Subject').fill(subject);
  await dialog.getByRole('button', { name: 'Create template' }).click();
  await page.getByText(subject).waitFor();
}
