/* A patch site made by the patchable_function_entry attribute in a unit built without
 * -fpatchable-function-entry (vector_state_test.cpp): GCC keeps interprocedural register
 * allocation (-fipa-ra) on here, so callers in this unit may keep values in any vector
 * register the function leaves alone, and the unit's DW_AT_producer ("GNU C17 ... -O2 -g",
 * no -fpatchable-function-entry) is how dprobe can tell. */
__attribute__((noinline, patchable_function_entry(5))) long vs_attr_pfe(long x)
{
    return x + 1;
}
