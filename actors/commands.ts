/**
 * The operator's allowlist of programs that commands written in submitted templates may run (`DIRIGENT_COMMANDS`):
 * `script` tasks, a loop's `<script_execution>`, `<file_paths source="command">` and the targets of
 * `request_evaluation`. Empty (the default): template commands are off. The model's own `run_script` tool is a
 * separate switch (`DIRIGENT_TOOLS`).
 *
 * A program is allowed when `argv[0]` is exactly an entry: an entry without a `/` (`python3`) allows that name,
 * looked up on the program's PATH, and nothing else (not `./python3`, not `/tmp/x/python3`); an entry with a `/`
 * (`/usr/bin/python3`) allows that exact path.
 */

/** The setting named in refusals. */
export const COMMANDS_SETTING = "DIRIGENT_COMMANDS";

/** Why `program` may not run as a template command under `allow`; undefined when it may. */
export function commandRefusal(program: string, allow: readonly string[]): string | undefined {
  if (allow.includes(program)) return undefined;
  if (allow.length === 0) {
    return `template commands are off: program '${program}' may not run (set ${COMMANDS_SETTING} to the programs templates may run, e.g. ${COMMANDS_SETTING}=python3,pytest)`;
  }
  return `program '${program}' is not allowed for template commands (${COMMANDS_SETTING}=${allow.join(",")}; add it there to allow it)`;
}

/**
 * Variables that change which code a program runs (loader and interpreter hooks, module paths, git's config and
 * hooks) and the runtime's own secrets: never passed to a program, whether from the Handler's allowlist or a
 * template's `<environment>`.
 */
export const REFUSED_ENV =
  /^(?:OPENAI_API_KEY|NATS_PASSWORD|NATS_TOKEN|LD_\w+|DYLD_\w+|NODE_OPTIONS|NODE_PATH|PYTHONPATH|PYTHONSTARTUP|PYTHONHOME|PYTHONUSERBASE|PERL5LIB|PERLLIB|PERL5OPT|RUBYOPT|RUBYLIB|JAVA_TOOL_OPTIONS|_JAVA_OPTIONS|JDK_JAVA_OPTIONS|GIT_\w+|BASH_ENV|ENV)$/;

/** Keeps the variables of `env` a program may get (see {@link REFUSED_ENV}). */
export function withoutRefused(env: Readonly<Record<string, string>>): Record<string, string> {
  return Object.fromEntries(Object.entries(env).filter(([name]) => !REFUSED_ENV.test(name)));
}
