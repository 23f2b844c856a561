/* replay.h — included last by the byte-stream fuzz targets: without
 * -DBRIG_LIBFUZZER (no clang at hand) the target gets a main() that runs
 * each file named on the command line through LLVMFuzzerTestOneInput,
 * to replay a crash or a corpus with any compiler. */
#ifndef BRIG_LIBFUZZER
#include <stdio.h>

int main(int argc, char **argv)
{
        static uint8_t data[1 << 20];
        for (int i = 1; i < argc; i++) {
                FILE *f = fopen(argv[i], "rb");
                if (!f) {
                        perror(argv[i]);
                        return 1;
                }
                size_t n = fread(data, 1, sizeof data, f);
                fclose(f);
                LLVMFuzzerTestOneInput(data, n);
                printf("%s: ok\n", argv[i]);
        }
        return 0;
}
#endif
