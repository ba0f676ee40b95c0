import { describe, expect, it } from 'vitest';
import { assertTenantAdmin, PermissionDenied } from '../../src/core/errors.ts';

describe('assertTenantAdmin', () => {
  it('lets a tenant admin through', () => {
    expect(() => assertTenantAdmin({ role: 'admin' }, 'Erasure is for tenant admins')).not.toThrow();
  });

  it.each(['member', 'service'] as const)('denies a %s, with the message it was given', (role) => {
    let thrown: unknown;
    try {
      assertTenantAdmin({ role }, 'Erasure is for tenant admins');
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(PermissionDenied);
    expect(thrown).toMatchObject({ code: 'permission-denied', message: 'Erasure is for tenant admins' });
  });
});
