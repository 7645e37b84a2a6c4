# Helpers shared by the layer CMakeLists.

# Layers, lowest first (Documentation/design.md, "Layers"): tools -> tracefs -> {fprobe,
# kprobe} -> core -> arch. Sources include each other as "<layer>/file.h" from the top of the
# tree; a layer is compiled with an include root that holds only itself and the layers below
# it (${CMAKE_BINARY_DIR}/layers/<name>/<layer> -> <source>/<layer>), so including a header of
# a layer above or beside fails to compile. include/ (the public C API) is open to all.
set(DPROBE_LAYER_DIR_arch arch)
set(DPROBE_LAYER_DIR_core core)
set(DPROBE_LAYER_DIR_fprobe fprobe)
set(DPROBE_LAYER_DIR_kprobe kprobe)
set(DPROBE_LAYER_DIR_tracefs tracefs)
set(DPROBE_LAYER_DIR_tools tools)
set(DPROBE_LAYER_BELOW_arch)
set(DPROBE_LAYER_BELOW_core arch)
set(DPROBE_LAYER_BELOW_fprobe core)
set(DPROBE_LAYER_BELOW_kprobe core)
set(DPROBE_LAYER_BELOW_tracefs fprobe kprobe)
set(DPROBE_LAYER_BELOW_tools tracefs)

# dprobe_layer_closure(OUT LAYER): LAYER and every layer below it.
function(dprobe_layer_closure out layer)
  set(all ${layer})
  foreach(b ${DPROBE_LAYER_BELOW_${layer}})
    dprobe_layer_closure(sub ${b})
    list(APPEND all ${sub})
  endforeach()
  list(REMOVE_DUPLICATES all)
  set(${out} ${all} PARENT_SCOPE)
endfunction()

# dprobe_layer_root(OUT LAYER): the include root of LAYER (made at configure time).
function(dprobe_layer_root out layer)
  set(root ${CMAKE_BINARY_DIR}/layers/${layer})
  dprobe_layer_closure(seen ${layer})
  file(MAKE_DIRECTORY ${root})
  foreach(l ${seen})
    set(d ${DPROBE_LAYER_DIR_${l}})
    if(NOT EXISTS ${root}/${d})
      file(CREATE_LINK ${PROJECT_SOURCE_DIR}/${d} ${root}/${d} SYMBOLIC)
    endif()
  endforeach()
  set(${out} ${root} PARENT_SCOPE)
endfunction()

# dprobe_layer(NAME LAYER [OFFLINE FILE...] [PRELOAD FILE...]): a layer as two OBJECT
# libraries, built PIC with hidden visibility, that see only the layer's include root:
#   NAME_offline  the FILEs listed after OFFLINE (relative to the current directory): the
#                 layer's part of the offline library - parsers, formats, symbols, decoding;
#                 no constructor, no signal or loader hook, no interposer, nothing that runs
#                 in a traced process by being linked. It links only the offline parts of the
#                 layers right below.
#   NAME          every other .cpp/.c/.S in the current directory (non-recursive, plus one
#                 level of subdirectories): the layer's runtime part. It links NAME_offline and
#                 the layer(s) right below.
# The runtime libraries (libdprobe.so, dprobe_static, libdprobe-preload.so) take the objects of
# both parts, DPROBE_RUNTIME_OBJECTS; dprobe_offline takes the offline ones only (the CLI
# links it). The FILEs listed after PRELOAD make a third OBJECT library, NAME_preload, that
# only libdprobe-preload.so links: what the preload does differently from the runtime users
# link (arch/x86_64/private_ns.h). The FILEs listed after APART are in none of these: they
# build an object of their own (arch/x86_64/private_ns_alloc.S). Each file is compiled once. The offline parts share their layer's include root
# (a header may serve both parts), so what keeps them apart is the link: dprobe_offline_closed
# links every offline object into a shared object with --no-undefined, and the build fails
# when an offline file calls into the runtime (CMakeLists.txt).
function(dprobe_layer name layer)
  cmake_parse_arguments(PARSE_ARGV 2 arg "" "" "OFFLINE;PRELOAD;APART")
  file(GLOB srcs CONFIGURE_DEPENDS
    ${CMAKE_CURRENT_SOURCE_DIR}/*.cpp ${CMAKE_CURRENT_SOURCE_DIR}/*.c ${CMAKE_CURRENT_SOURCE_DIR}/*.S
    ${CMAKE_CURRENT_SOURCE_DIR}/*/*.cpp ${CMAKE_CURRENT_SOURCE_DIR}/*/*.c ${CMAKE_CURRENT_SOURCE_DIR}/*/*.S)
  set(offline)
  foreach(f ${arg_OFFLINE})
    set(f ${CMAKE_CURRENT_SOURCE_DIR}/${f})
    if(NOT f IN_LIST srcs)
      message(FATAL_ERROR "dprobe_layer(${name}): OFFLINE file ${f} is not a source of the layer")
    endif()
    list(APPEND offline ${f})
  endforeach()
  set(preload)
  foreach(f ${arg_PRELOAD})
    set(f ${CMAKE_CURRENT_SOURCE_DIR}/${f})
    if(NOT f IN_LIST srcs)
      message(FATAL_ERROR "dprobe_layer(${name}): PRELOAD file ${f} is not a source of the layer")
    endif()
    list(APPEND preload ${f})
  endforeach()
  set(apart)
  foreach(f ${arg_APART})
    list(APPEND apart ${CMAKE_CURRENT_SOURCE_DIR}/${f})
  endforeach()
  list(REMOVE_ITEM srcs ${offline} ${preload} ${apart})
  # A part with no files (a layer whose files have not landed yet, or that has no offline
  # file) still yields an (empty) object library.
  if(NOT srcs)
    set(srcs ${PROJECT_SOURCE_DIR}/cmake/empty.c)
  endif()
  if(NOT offline)
    set(offline ${PROJECT_SOURCE_DIR}/cmake/empty.c)
  endif()
  add_library(${name}_offline OBJECT ${offline})
  add_library(${name} OBJECT ${srcs})
  set(parts ${name}_offline ${name})
  if(preload)
    add_library(${name}_preload OBJECT ${preload})
    list(APPEND parts ${name}_preload)
  endif()
  dprobe_layer_root(root ${layer})
  foreach(t ${parts})
    target_include_directories(${t} PUBLIC ${PROJECT_SOURCE_DIR}/include ${root})
    target_compile_options(${t} PRIVATE -fvisibility=hidden
      $<$<COMPILE_LANGUAGE:CXX>:-fvisibility-inlines-hidden>)
    set_target_properties(${t} PROPERTIES POSITION_INDEPENDENT_CODE ON)
  endforeach()
  target_link_libraries(${name} PUBLIC ${name}_offline)
  foreach(b ${DPROBE_LAYER_BELOW_${layer}})
    target_link_libraries(${name}_offline PUBLIC dprobe_${b}_offline)
    target_link_libraries(${name} PUBLIC dprobe_${b})
  endforeach()
endfunction()

# Flavours in which test programs are built: patch sites from -pg -mfentry, from
# -fpatchable-function-entry=5, and none at all (plain).
set(DPROBE_FLAVOUR_fentry -pg -mfentry)
set(DPROBE_FLAVOUR_pfe -fpatchable-function-entry=5)
set(DPROBE_FLAVOUR_plain)

# dprobe_soname(OUT FILE): the DT_SONAME of the shared library FILE (what dlopen names it
# by, as a DT_NEEDED entry would), read at configure time.
function(dprobe_soname out file)
  execute_process(COMMAND ${CMAKE_OBJDUMP} -p ${file} OUTPUT_VARIABLE dump
    RESULT_VARIABLE rc ERROR_QUIET)
  if(NOT rc EQUAL 0 OR NOT dump MATCHES "SONAME +([^ \n]+)")
    message(FATAL_ERROR "dprobe_soname: cannot read the soname of ${file}")
  endif()
  set(${out} ${CMAKE_MATCH_1} PARENT_SCOPE)
endfunction()
