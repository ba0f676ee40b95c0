-- The app's privileges move from the cluster-wide group mnemo_app (0002) to a group of this
-- database's own, so the app role of one Mnemo database cannot read another database on the same
-- cluster (docs/decisions.md, "Roles and small fixes"). 0002 and 0005 are left as applied.
--
-- The group is named after the database when it is first adopted: mnemo_app_<database>, cut to
-- PostgreSQL's 63-byte identifier limit with a digest of the whole name so that two long names
-- sharing a prefix still differ.
CREATE FUNCTION mnemo_group_role_name(p_database text) RETURNS text
  LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
  AS $$
DECLARE
  role_name text := 'mnemo_app_' || p_database;
  kept integer := length(p_database);
BEGIN
  WHILE octet_length(role_name) > 63 LOOP
    kept := kept - 1;
    role_name := 'mnemo_app_' || left(p_database, kept) || '_' || left(md5(p_database), 8);
  END LOOP;
  RETURN role_name;
END
$$;
--> statement-breakpoint
-- Makes the group named for current_database() this database's app group: creates it, grants it
-- everything the app needs (the one list of the app's privileges: a migration that gives the app
-- more redefines this function), records its name in mnemo_app_group(), and revokes everything
-- in this database from the group that held it before (mnemo_app, or the group of the database
-- this one was copied from or renamed from). `mnemo migrate` calls it after every run, so a copy
-- made with CREATE DATABASE … TEMPLATE gets a group of its own the first time it is migrated.
--
-- p_login, the login role of DATABASE_URL, is granted the group in the same transaction, so a
-- running app never finds itself without privileges during an upgrade; it also leaves mnemo_app,
-- whose membership would still open every database not yet upgraded.
CREATE FUNCTION mnemo_adopt_app_group(p_login text) RETURNS text
  LANGUAGE plpgsql SET search_path = public, pg_temp
  AS $$
DECLARE
  target text := mnemo_group_role_name(current_database());
  previous text := 'mnemo_app';
  previous_oid oid;
  this_database oid := (SELECT oid FROM pg_database WHERE datname = current_database());
  may_grant_connect boolean := (SELECT pg_has_role(current_user, datdba, 'USAGE') FROM pg_database WHERE oid = this_database);
  item record;
BEGIN
  IF to_regprocedure('mnemo_app_group()') IS NOT NULL THEN
    EXECUTE 'SELECT mnemo_app_group()' INTO previous;
  END IF;

  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = target) THEN
    EXECUTE format('CREATE ROLE %I NOLOGIN NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE', target);
  ELSIF EXISTS (SELECT FROM pg_roles WHERE rolname = target AND (rolsuper OR rolbypassrls)) THEN
    RAISE EXCEPTION 'role % exists and bypasses row-level security; it cannot be the app group of database %', target, current_database();
  ELSIF target <> previous AND EXISTS (
    SELECT FROM pg_shdepend d
    WHERE d.refclassid = 'pg_authid'::regclass AND d.refobjid = (SELECT oid FROM pg_roles WHERE rolname = target)
      AND (d.dbid NOT IN (0, this_database) OR (d.classid = 'pg_database'::regclass AND d.objid <> this_database))
  ) THEN
    RAISE EXCEPTION 'role % already holds privileges in another database (renamed from %?); run mnemo migrate there first, or drop the role', target, current_database();
  END IF;

  EXECUTE format('GRANT USAGE ON SCHEMA public TO %I', target);
  EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO %I', target);
  EXECUTE format('GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO %I', target);
  -- Tables and sequences created by later migrations (run by the same owner) are granted the same way.
  EXECUTE format('ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO %I', target);
  EXECUTE format('ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT USAGE, SELECT ON SEQUENCES TO %I', target);
  EXECUTE format('GRANT EXECUTE ON FUNCTION ensure_embedding_index(text, integer), retire_embedding_index(text) TO %I', target);
  -- Only the group may connect (superusers and the owner always can). Granting on a database
  -- needs its owner; a migration role that is not leaves the database's CONNECT as it was.
  IF may_grant_connect THEN
    EXECUTE format('GRANT CONNECT ON DATABASE %I TO %I', current_database(), target);
    EXECUTE format('REVOKE CONNECT ON DATABASE %I FROM PUBLIC', current_database());
  END IF;
  EXECUTE format(
    'CREATE OR REPLACE FUNCTION mnemo_app_group() RETURNS text LANGUAGE sql STABLE PARALLEL SAFE AS %L',
    format('SELECT %L::text', target));

  previous_oid := (SELECT oid FROM pg_roles WHERE rolname = previous);
  IF previous <> target AND previous_oid IS NOT NULL THEN
    EXECUTE format('REVOKE ALL ON ALL TABLES IN SCHEMA public FROM %I', previous);
    EXECUTE format('REVOKE ALL ON ALL SEQUENCES IN SCHEMA public FROM %I', previous);
    EXECUTE format('REVOKE ALL ON SCHEMA public FROM %I', previous);
    FOR item IN
      SELECT p.oid::regprocedure AS fn FROM pg_proc p CROSS JOIN LATERAL aclexplode(p.proacl) a
      WHERE a.grantee = previous_oid
    LOOP
      EXECUTE format('REVOKE ALL ON FUNCTION %s FROM %I', item.fn, previous);
    END LOOP;
    FOR item IN
      SELECT DISTINCT d.defaclrole::regrole AS owner, d.defaclnamespace::regnamespace AS nsp, d.defaclobjtype AS kind
      FROM pg_default_acl d CROSS JOIN LATERAL aclexplode(d.defaclacl) a
      WHERE a.grantee = previous_oid
    LOOP
      EXECUTE format('ALTER DEFAULT PRIVILEGES FOR ROLE %s %s REVOKE ALL ON %s FROM %I',
        item.owner,
        CASE WHEN item.nsp::oid = 0 THEN '' ELSE format('IN SCHEMA %s', item.nsp) END,
        CASE item.kind WHEN 'r' THEN 'TABLES' WHEN 'S' THEN 'SEQUENCES' WHEN 'f' THEN 'FUNCTIONS'
                       WHEN 'T' THEN 'TYPES' ELSE 'SCHEMAS' END,
        previous);
    END LOOP;
    IF may_grant_connect THEN
      EXECUTE format('REVOKE ALL ON DATABASE %I FROM %I', current_database(), previous);
    END IF;
  END IF;

  IF p_login IS NOT NULL THEN
    IF NOT pg_has_role(p_login, target, 'MEMBER') THEN
      EXECUTE format('GRANT %I TO %I', target, p_login);
    END IF;
    IF EXISTS (SELECT FROM pg_auth_members m JOIN pg_roles g ON g.oid = m.roleid JOIN pg_roles l ON l.oid = m.member
               WHERE g.rolname = 'mnemo_app' AND l.rolname = p_login) THEN
      EXECUTE format('REVOKE mnemo_app FROM %I', p_login);
    END IF;
  END IF;
  RETURN target;
END
$$;
--> statement-breakpoint
REVOKE ALL ON FUNCTION mnemo_adopt_app_group(text) FROM PUBLIC;
--> statement-breakpoint
-- `mnemo migrate` names the login role to provision in this session setting; other ways of
-- applying the migrations leave it unset, and `mnemo migrate` grants the login role afterwards.
SELECT mnemo_adopt_app_group(nullif(current_setting('mnemo.app_login_role', true), ''));
