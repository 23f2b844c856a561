/* doctor.c — `brig doctor [--json]`. */
#define _GNU_SOURCE
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cmd_doctor(int argc, char **argv)
{
        bool json = false;
        for (int i = 1; i < argc; i++) {
                if (strcmp(argv[i], "--json") == 0) {
                        json = true;
                } else {
                        cli_say("brig doctor: unknown option '%s' (expected --json)\n", argv[i]);
                        return BRIG_EXIT_SETUP;
                }
        }
        bool ok = false;
        brig_error *err = NULL;
        char *text = json ? brig_doctor_json(&ok, &err) : brig_doctor_text(&ok, &err);
        if (!text)
                return cli_fail(err);
        fputs(text, stdout);
        if (json)
                fputc('\n', stdout);
        free(text);
        return ok ? 0 : 1;
}
