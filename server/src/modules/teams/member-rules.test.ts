import { describe, expect, it } from 'vitest';
import { AppError } from '../../http/errors.ts';
import type { TeamRole } from '../auth/index.ts';
import { checkMemberChange, type MemberChange } from './member-rules.ts';

const actor = (role: TeamRole, userId = 'usr_actor') => ({
  userId,
  role,
  canManage: role === 'owner' || role === 'admin',
});
const target = (role: TeamRole, userId = 'usr_target') => ({ userId, role });
const promote = (role: TeamRole): MemberChange => ({ kind: 'updateRole', role });
const remove: MemberChange = { kind: 'remove' };

function outcome(run: () => void): string {
  try {
    run();
    return 'allowed';
  } catch (error) {
    if (!(error instanceof AppError)) throw error;
    return `${error.code} ${String(error.details.reason ?? error.details.permission)}`;
  }
}

describe('checkMemberChange', () => {
  it('lets owners change and remove anyone while another owner remains', () => {
    expect(outcome(() => checkMemberChange(actor('owner'), target('owner'), 2, promote('admin')))).toBe(
      'allowed',
    );
    expect(outcome(() => checkMemberChange(actor('owner'), target('owner'), 2, remove))).toBe('allowed');
    expect(outcome(() => checkMemberChange(actor('owner'), target('member'), 1, promote('owner')))).toBe(
      'allowed',
    );
    expect(outcome(() => checkMemberChange(actor('owner'), target('viewer'), 1, remove))).toBe('allowed');
  });

  it('refuses admins anything that touches an owner, and allows the rest', () => {
    expect(outcome(() => checkMemberChange(actor('admin'), target('owner'), 2, promote('admin')))).toBe(
      'FORBIDDEN OWNER_REQUIRED',
    );
    expect(outcome(() => checkMemberChange(actor('admin'), target('owner'), 2, remove))).toBe(
      'FORBIDDEN OWNER_REQUIRED',
    );
    expect(outcome(() => checkMemberChange(actor('admin'), target('member'), 1, promote('owner')))).toBe(
      'FORBIDDEN OWNER_REQUIRED',
    );
    expect(outcome(() => checkMemberChange(actor('admin'), target('member'), 1, promote('admin')))).toBe(
      'allowed',
    );
    expect(outcome(() => checkMemberChange(actor('admin'), target('admin'), 1, remove))).toBe('allowed');
  });

  it('keeps the last owner: not demoted, not removed, not leaving', () => {
    const self = 'usr_only_owner';
    expect(
      outcome(() => checkMemberChange(actor('owner', self), target('owner', self), 1, promote('admin'))),
    ).toBe('CONFLICT LAST_OWNER');
    expect(outcome(() => checkMemberChange(actor('owner', self), target('owner', self), 1, remove))).toBe(
      'CONFLICT LAST_OWNER',
    );
    expect(
      outcome(() => checkMemberChange(actor('owner', self), target('owner', self), 1, promote('owner'))),
    ).toBe('allowed');
    expect(outcome(() => checkMemberChange(actor('owner', self), target('owner', self), 2, remove))).toBe(
      'allowed',
    );
  });

  it('lets members and viewers leave but change nobody, themselves included', () => {
    for (const role of ['member', 'viewer'] as const) {
      const self = `usr_${role}`;
      expect(outcome(() => checkMemberChange(actor(role, self), target(role, self), 1, remove))).toBe(
        'allowed',
      );
      expect(
        outcome(() => checkMemberChange(actor(role, self), target(role, self), 1, promote('admin'))),
      ).toBe('FORBIDDEN team:manage');
      expect(outcome(() => checkMemberChange(actor(role), target('viewer'), 1, remove))).toBe(
        'FORBIDDEN team:manage',
      );
    }
  });
});
