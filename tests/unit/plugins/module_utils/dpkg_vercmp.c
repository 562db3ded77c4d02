/*
 * Copyright (c) gpufleet maintainers
 * GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
 * SPDX-License-Identifier: GPL-3.0-or-later
 *
 * dpkg's own version comparison, many pairs per process: the reference for
 * test_version_order.py. It calls libdpkg's parseversion() and
 * dpkg_version_compare(), the functions `dpkg --compare-versions` calls,
 * because running the dpkg binary once per pair costs about 1.4 ms.
 *
 * stdin: versions one per line, taken two by two (a, b).
 * stdout: one line per pair: "-1", "0" or "1" as a sorts before, with or
 * after b, or "E" where dpkg refuses either version (the dpkg binary exits 2
 * there). Parse warnings are ignored, as the dpkg binary compares anyway.
 *
 * Build: cc -o dpkg_vercmp dpkg_vercmp.c -ldpkg   (package libdpkg-dev)
 */
#define LIBDPKG_VOLATILE_API 1

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dpkg/dpkg.h>
#include <dpkg/dpkg-db.h>
#include <dpkg/error.h>
#include <dpkg/version.h>

/* 0 when dpkg accepts the version (perhaps with a warning), -1 when it refuses it. */
static int
parse(struct dpkg_version *version, const char *text)
{
	struct dpkg_error err = DPKG_ERROR_INIT;
	int refused = 0;

	if (parseversion(version, text, &err) < 0) {
		refused = err.type != DPKG_MSG_WARN;
		dpkg_error_destroy(&err);
	}
	return refused ? -1 : 0;
}

static int
read_line(char **line, size_t *size)
{
	ssize_t len = getline(line, size, stdin);

	if (len < 0)
		return -1;
	if (len > 0 && (*line)[len - 1] == '\n')
		(*line)[len - 1] = '\0';
	return 0;
}

int
main(void)
{
	char *a = NULL, *b = NULL;
	size_t a_size = 0, b_size = 0;

	while (read_line(&a, &a_size) == 0 && read_line(&b, &b_size) == 0) {
		struct dpkg_version va, vb;
		int rc;

		if (parse(&va, a) < 0 || parse(&vb, b) < 0) {
			puts("E");
			continue;
		}
		rc = dpkg_version_compare(&va, &vb);
		puts(rc < 0 ? "-1" : rc > 0 ? "1" : "0");
	}
	free(a);
	free(b);
	return ferror(stdout) ? 1 : 0;
}
