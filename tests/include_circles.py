#!/usr/bin/env python3
"""No include circles between the units of a folder and its subfolders: a unit is a .cpp with its
.h (either may be alone), and unit A depends on unit B when a file of A includes B.h, found beside
A's file or from the folder (`#include "gpt2/gpt2.h"` under models/). A circle (A needs B and B needs A, however far round) means neither can be read, tested or
moved without the other, so each folder's units must form layers.

Each FOLDER is checked as it is; then, so that a pass proves something, a copy of it with a circle
planted (the header of a unit that includes another is included back by that other) must fail,
naming the circle.

Usage: include_circles.py FOLDER...
"""
import pathlib
import re
import shutil
import sys
import tempfile

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.MULTILINE)
SOURCE_SUFFIXES = (".h", ".cpp")


def unit_of(path, folder):
    """A file's unit: its path under `folder` without the suffix ("gpt2/gpt2")."""
    return path.relative_to(folder).with_suffix("").as_posix()


def dependencies(folder):
    """Each unit's name, mapped to the units of `folder` its files include."""
    files = [path for path in sorted(folder.rglob("*")) if path.suffix in SOURCE_SUFFIXES]
    headers = {path for path in files if path.suffix == ".h"}
    needs = {unit_of(path, folder): set() for path in files}
    for path in files:
        for included in INCLUDE.findall(path.read_text(errors="replace")):
            for candidate in (path.parent / included, folder / included):
                if candidate in headers:
                    if unit_of(candidate, folder) != unit_of(path, folder):
                        needs[unit_of(path, folder)].add(unit_of(candidate, folder))
                    break
    return needs


def entangled_groups(needs):
    """The groups of two or more units each of which needs every other, however far round
    (Tarjan's strongly connected components)."""
    index, low, on_stack, stack, groups = {}, {}, set(), [], []

    def visit(unit):
        index[unit] = low[unit] = len(index)
        stack.append(unit)
        on_stack.add(unit)
        for other in sorted(needs[unit]):
            if other not in index:
                visit(other)
                low[unit] = min(low[unit], low[other])
            elif other in on_stack:
                low[unit] = min(low[unit], index[other])
        if low[unit] == index[unit]:
            group = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.add(member)
                if member == unit:
                    break
            if len(group) > 1:
                groups.append(group)

    for unit in sorted(needs):
        if unit not in index:
            visit(unit)
    return groups


def circle_in(needs, group):
    """A shortest way round from the group's first unit back to it, within the group."""
    start = min(group)
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        following = []
        for unit in frontier:
            for other in sorted(needs[unit] & group):
                if other == start:
                    return paths[unit] + [start]
                if other not in paths:
                    paths[other] = paths[unit] + [other]
                    following.append(other)
        frontier = following
    raise AssertionError(f"{sorted(group)} is strongly connected but has no way round")


def circle_text(needs, group):
    return " -> ".join(circle_in(needs, group))


def plant_circle(copy, needs):
    """Makes the first unit that another includes include that other back; returns the one
    planted in and the one it now includes."""
    for unit in sorted(needs):
        for needed in sorted(needs[unit]):
            target = copy / f"{needed}.cpp"
            if not target.exists():
                target = copy / f"{needed}.h"
            if (copy / f"{unit}.h").exists():
                with target.open("a") as out:
                    out.write(f'#include "{unit}.h"\n')
                return needed, unit
    raise SystemExit(f"FAIL: {copy}: no unit includes another, so no circle can be planted")


def main():
    folders = [pathlib.Path(argument) for argument in sys.argv[1:]]
    if not folders:
        raise SystemExit(__doc__)
    failed = False
    for folder in folders:
        needs = dependencies(folder)
        for group in entangled_groups(needs):
            print(f"FAIL: {folder}: include circle: {circle_text(needs, group)}")
            failed = True
        with tempfile.TemporaryDirectory() as scratch:
            copy = pathlib.Path(scratch) / folder.name
            shutil.copytree(folder, copy)
            planted, back = plant_circle(copy, needs)
            planted_needs = dependencies(copy)
            caught = [group for group in entangled_groups(planted_needs) if {planted, back} <= group]
            if caught:
                print(f"{folder}: a circle planted in a copy ({planted} includes {back}.h) is found: "
                      f"{circle_text(planted_needs, caught[0])}")
            else:
                print(f"FAIL: {folder}: a circle planted in a copy ({planted} includes {back}.h) was not found")
                failed = True
    if failed:
        raise SystemExit(1)
    print("PASS")


if __name__ == "__main__":
    main()
