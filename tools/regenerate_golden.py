#!/usr/bin/python3
"""Golden files: the commands whose outputs the README and docs quote, with those outputs (docs/development.md).

tests/golden/NAME.tesh holds, in the spirit of SimGrid's .tesh files:
    # comments: what the output is quoted for, how long it takes
    ! mask REGEX        what varies from run to run (wall times): replaced by <masked> on both sides before comparing
    ! timeout SECONDS   per command (default 60)
    ! stderr            each command's standard error follows its stdout in the output (warnings quoted)
    $ lcsim plan scenarios/default.json --samples 1
    > one line of the expected stdout ('>' alone: an empty line)
A file may hold several '$' commands; ${TMPDIR} is a temporary folder shared by a file's commands. Commands run
from the repository root, without a shell; `lcsim`, `lcsim-fit-trace` and `python3` name the binaries given here.

In README.md and docs/*.md a block between
    <!-- golden: tests/golden/NAME.tesh [cmd=N] [lines=A-B,C] [grep=REGEX] [nocmd] [raw] -->
    <!-- /golden -->
is a fenced copy of command N's '$' line (unless nocmd) and output (all of it, or the lines selected; raw: those
lines unfenced, for a markdown table the command printed), and
    <!-- golden: tests/golden/NAME.tesh re=REGEX [cmd=N] [min|max|count] [over=REGEX2 [over_file=F] [over_cmd=M]] [delta]
         [fmt=SPEC] -->FIGURE<!-- /golden -->
inside a line is REGEX's first match in that output (its first group if it has one), or a figure computed from it:
    min, max       the smallest or largest figure over every match of REGEX, not the first
    count          how many lines REGEX matches (a count over rows: "16 of 17 within tolerance")
    over=REGEX2    divided by REGEX2's first match in command M of F (default: the same file and command, or
                   F's last command when over_file names one)
    delta          minus 1 (a ratio as a gain: +28%)
    fmt=SPEC       a Python format spec for the number (.2f, +.0%, .1%): needed with over and delta; without it a
                   figure is printed as the output spells it

    tools/regenerate_golden.py --lcsim build/bin/lcsim            rerun every golden file, rewrite it and the docs
    tools/regenerate_golden.py --lcsim BIN --check [FILE.tesh...]  rerun and compare (a test); exit 1 with a diff
    tools/regenerate_golden.py --docs                              only rewrite the docs' blocks from the files
    tools/regenerate_golden.py --check --docs                      only compare the docs' blocks with the files
"""
import argparse
import difflib
import glob
import os
import re
import shlex
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GOLDEN_DIR = os.path.join(ROOT, 'tests', 'golden')
DOCS = ['README.md'] + sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, 'docs', '*.md')))
MASKED = '<masked>'
BLOCK_OPEN = re.compile(r'^<!-- golden: (.*?) -->$')
BLOCK_CLOSE = '<!-- /golden -->'
INLINE = re.compile(r'(?<!`)<!-- golden: (.*?) -->(.*?)<!-- /golden -->')  # `...`: a marker shown, not used


class Golden:
    """One .tesh file: header lines (comments and directives), masks, and its commands with their outputs."""

    def __init__(self, path):
        self.path = path
        self.header = []
        self.masks = []
        self.timeout = 60
        self.stderr = False
        self.commands = []  # [command line, [output lines]]
        for number, line in enumerate(open(path, encoding='utf-8').read().split('\n'), 1):
            if line.startswith('$ '):
                self.commands.append([line[2:], []])
            elif line == '>' or line.startswith('> '):
                if not self.commands:
                    sys.exit(f'{path}:{number}: output before the first $ command')
                self.commands[-1][1].append(line[2:])
            elif self.commands and line:
                sys.exit(f'{path}:{number}: after the first $ command only $ and > lines may follow')
            elif line.startswith('! mask '):
                self.masks.append(re.compile(line[len('! mask '):]))
                self.header.append(line)
            elif line.startswith('! timeout '):
                self.timeout = float(line[len('! timeout '):])
                self.header.append(line)
            elif line == '! stderr':
                self.stderr = True
                self.header.append(line)
            elif line.startswith('#') or not line:
                if not self.commands:
                    self.header.append(line)
            else:
                sys.exit(f'{path}:{number}: not a comment, ! directive, $ command or > output line: {line}')
        while self.header and not self.header[-1]:
            self.header.pop()
        if not self.commands:
            sys.exit(f'{path}: no $ command')

    def mask(self, lines):
        out = []
        for line in lines:
            for regex in self.masks:
                line = regex.sub(MASKED, line)
            out.append(line)
        return out

    def write(self, outputs):
        text = '\n'.join(self.header) + '\n'
        for (command, _), lines in zip(self.commands, outputs):
            text += f'$ {command}\n' + ''.join(f'> {line}\n' if line else '>\n' for line in lines)
        with open(self.path, 'w', encoding='utf-8') as out:
            out.write(text)


def run(golden, binaries):
    """Runs every command of a golden file; returns their stdout lines, or exits naming the failing command."""
    outputs = []
    with tempfile.TemporaryDirectory(prefix='lcsim-golden-') as tmp:
        for command, _ in golden.commands:
            argv = shlex.split(command.replace('${TMPDIR}', tmp))
            if argv[0] in binaries:
                argv[0] = binaries[argv[0]]
            try:
                done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=golden.timeout,
                                      env=dict(os.environ, LC_ALL='C'))
            except (OSError, subprocess.TimeoutExpired) as error:
                sys.exit(f'{golden.path}: `{command}` did not run: {error}')
            if done.returncode != 0:
                sys.exit(f'{golden.path}: `{command}` exited with {done.returncode}:\n{done.stderr}')
            lines = []
            for stream in [done.stdout] + ([done.stderr] if golden.stderr else []):
                stream_lines = stream.split('\n')
                if stream_lines and stream_lines[-1] == '':
                    stream_lines.pop()
                lines += stream_lines
            # The temporary folder's name differs each run: printed paths show it as the command spells it,
            # and the repository's path differs between checkouts: paths print relative to it.
            outputs.append([line.rstrip().replace(tmp, '${TMPDIR}').replace(ROOT + '/', '') for line in lines])
    return outputs


BLOCK_OPTIONS = {'cmd', 'lines', 'grep', 'nocmd', 'raw'}
FIGURE_OPTIONS = {'re', 'cmd', 'min', 'max', 'count', 'over', 'over_file', 'over_cmd', 'delta', 'fmt'}


def output(golden, cmd, where):
    """Command N's '$' line and output lines (N counts from 1; the last command when N is None)."""
    index = int(cmd if cmd is not None else len(golden.commands)) - 1
    if not 0 <= index < len(golden.commands):
        sys.exit(f'{where}: {golden.path} has no command {index + 1}')
    return golden.commands[index]


def captures(regex, golden, lines, where):
    """Every match of REGEX in the output (each its first group if it has one), in order; exits on none."""
    found = [m.group(1) if m.groups() else m.group(0) for m in re.finditer(regex, '\n'.join(lines), re.M)]
    if not found:
        sys.exit(f'{where}: re={regex} matches nothing in {golden.path}')
    return found


def number(text, where):
    try:
        return float(text)
    except ValueError:
        sys.exit(f'{where}: {text!r} is not a number, and min, max, over, delta and fmt compute with numbers')


def figure(golden, options, where, load):
    """An inline figure: REGEX's first match in command N's output, or (min, max, over, delta, fmt) one computed
    from the output's figures, so that a ratio or a range is generated like the figures it comes from."""
    if 'min' in options and 'max' in options:
        sys.exit(f'{where}: min and max together')
    found = captures(options['re'], golden, output(golden, options.get('cmd'), where)[1], where)
    if 'count' in options:  # how many lines match: "16 of 17 within tolerance"
        return str(len(found))
    text = found[0]
    if 'min' in options or 'max' in options:
        text = (min if 'min' in options else max)(found, key=lambda t: number(t, where))
    if not {'over', 'delta', 'fmt'} & options.keys():
        return text  # as the output spells it
    if 'fmt' not in options:
        sys.exit(f'{where}: over and delta need fmt=SPEC (a Python format spec: .2f, +.0%)')
    value = number(text, where)
    if 'over' in options:
        other = load(options['over_file'], where) if 'over_file' in options else golden
        cmd = options.get('over_cmd', None if 'over_file' in options else options.get('cmd'))
        denominator = number(captures(options['over'], other, output(other, cmd, where)[1], where)[0], where)
        if denominator == 0:
            sys.exit(f'{where}: over={options["over"]} is 0 in {other.path}')
        value /= denominator
    if 'delta' in options:
        value -= 1
    try:
        return format(value, options['fmt'])
    except ValueError as error:
        sys.exit(f'{where}: fmt={options["fmt"]}: {error}')


def select(golden, spec, where, load):
    """The text a doc marker stands for: a fenced block, or (re=...) one inline figure."""
    options = {}
    for word in shlex.split(spec)[1:]:
        key, _, value = word.partition('=')
        options[key] = value
    unknown = options.keys() - (FIGURE_OPTIONS if 're' in options else BLOCK_OPTIONS)
    if unknown:
        sys.exit(f'{where}: unknown option {", ".join(sorted(unknown))} (see tools/regenerate_golden.py --help)')
    if 're' in options:
        return figure(golden, options, where, load)
    command, lines = output(golden, options.get('cmd'), where)
    if 'lines' in options:
        chosen = []
        for part in options['lines'].split(','):
            first, _, last = part.partition('-')
            chosen += lines[int(first) - 1:int(last or first)]
        lines = chosen
    if 'grep' in options:
        lines = [line for line in lines if re.search(options['grep'], line)]
    if 'raw' in options:  # markdown the command printed (a table): the lines as they are, no fence
        return '\n'.join(lines)
    shown = [] if 'nocmd' in options else ['$ ' + command.replace('${TMPDIR}/', '')]
    return '```\n' + '\n'.join(shown + lines) + '\n```'


def render(doc, cache):
    """The doc with every golden marker's content replaced by what its golden file says."""

    def golden_of(spec, where):
        name = shlex.split(spec)[0]
        if name not in cache:
            path = os.path.join(ROOT, name)
            if not os.path.exists(path):
                sys.exit(f'{where}: no golden file {name}')
            cache[name] = Golden(path)
        return cache[name]

    out, lines, i, fenced = [], open(os.path.join(ROOT, doc), encoding='utf-8').read().split('\n'), 0, False
    while i < len(lines):
        line = lines[i]
        where = f'{doc}:{i + 1}'
        if line.startswith('```'):  # a marker inside a fenced block is an example, not a marker
            fenced = not fenced
        block = None if fenced else BLOCK_OPEN.match(line)
        if block:
            end = next((j for j in range(i + 1, len(lines)) if lines[j] == BLOCK_CLOSE), None)
            if end is None:
                sys.exit(f'{where}: no {BLOCK_CLOSE} after this marker')
            out += [line, select(golden_of(block.group(1), where), block.group(1), where, golden_of), BLOCK_CLOSE]
            i = end + 1
            continue
        if fenced:
            out.append(line)
            i += 1
            continue
        out.append(INLINE.sub(lambda m: f'<!-- golden: {m.group(1)} -->'
                              f'{select(golden_of(m.group(1), where), m.group(1), where, golden_of)}<!-- /golden -->',
                              line))
        i += 1
    return '\n'.join(out)


def diff(expected, actual, name):
    return ''.join(difflib.unified_diff([l + '\n' for l in expected], [l + '\n' for l in actual],
                                        f'{name} (expected)', f'{name} (this run)'))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('files', nargs='*', help='golden files (default: every tests/golden/*.tesh)')
    parser.add_argument('--lcsim', help='the lcsim binary to run')
    parser.add_argument('--lcsim-fit-trace', help='the lcsim-fit-trace binary, for the files that run it')
    parser.add_argument('--check', action='store_true', help='compare instead of rewriting; exit 1 on a difference')
    parser.add_argument('--docs', action='store_true', help='only the docs: no command is run')
    args = parser.parse_args()
    files = [os.path.abspath(f) for f in args.files] or sorted(glob.glob(os.path.join(GOLDEN_DIR, '*.tesh')))
    binaries = {'python3': sys.executable}
    for name, path in (('lcsim', args.lcsim), ('lcsim-fit-trace', args.lcsim_fit_trace)):
        if path:
            binaries[name] = os.path.abspath(path)
    failed = False
    if not args.docs:
        if not args.lcsim:
            sys.exit('--lcsim BINARY is needed to run the golden files (or --docs to check the docs alone)')
        for path in files:
            golden = Golden(path)
            outputs = run(golden, binaries)
            name = os.path.relpath(path, ROOT)
            differences = ''
            for (command, expected), actual in zip(golden.commands, outputs):
                masked_expected, masked_actual = golden.mask(expected), golden.mask(actual)
                if masked_expected != masked_actual:
                    differences += f'$ {command}\n' + diff(masked_expected, masked_actual, name)
            if not differences:
                print(f'{name}: same output')
            elif args.check:
                print(f'{name}: the output differs (masked: {MASKED}); if the change is meant, rerun '
                      f'tools/regenerate_golden.py --lcsim BINARY {name}\n{differences}')
                failed = True
            else:
                golden.write(outputs)
                print(f'{name}: rewritten')
        if args.check and args.files:
            return 1 if failed else 0  # a golden file's own test; the docs have a test of their own
    cache = {}
    for doc in DOCS:
        before = open(os.path.join(ROOT, doc), encoding='utf-8').read()
        after = render(doc, cache)
        if before == after:
            continue
        if args.check:
            print(f'{doc}: a golden block differs from its golden file; run tools/regenerate_golden.py --docs\n'
                  + diff(before.split('\n'), after.split('\n'), doc))
            failed = True
        else:
            with open(os.path.join(ROOT, doc), 'w', encoding='utf-8') as out:
                out.write(after)
            print(f'{doc}: golden blocks rewritten')
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
