/* The program flavour of symdata_lib.c: only read by symbols_test, never run there. */
int symdata_gamma(int x);

int main(int argc, char **argv)
{
    (void)argv;
    return symdata_gamma(argc) & 1;
}
