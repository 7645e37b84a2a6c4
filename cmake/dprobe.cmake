# Helpers shared by the layer CMakeLists.

# dprobe_layer(NAME DIR): an OBJECT library from every .cpp/.c/.S in DIR (non-recursive,
# plus one level of subdirectories), built PIC with hidden visibility.
function(dprobe_layer name)
  file(GLOB srcs CONFIGURE_DEPENDS
    ${CMAKE_CURRENT_SOURCE_DIR}/*.cpp ${CMAKE_CURRENT_SOURCE_DIR}/*.c ${CMAKE_CURRENT_SOURCE_DIR}/*.S
    ${CMAKE_CURRENT_SOURCE_DIR}/*/*.cpp ${CMAKE_CURRENT_SOURCE_DIR}/*/*.c ${CMAKE_CURRENT_SOURCE_DIR}/*/*.S)
  if(NOT srcs)
    # A layer whose files have not landed yet still yields an (empty) object library.
    set(srcs ${PROJECT_SOURCE_DIR}/cmake/empty.c)
  endif()
  add_library(${name} OBJECT ${srcs})
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR}/include ${PROJECT_SOURCE_DIR})
  target_include_directories(${name} SYSTEM PRIVATE ${LIBELF_INCLUDE_DIRS} ${LIBDW_INCLUDE_DIRS}
    ${FUSE3_INCLUDE_DIRS} ${TRACEEVENT_INCLUDE_DIRS})
  target_link_libraries(${name} PRIVATE Zydis::Zydis)
  target_compile_options(${name} PRIVATE -fvisibility=hidden $<$<COMPILE_LANGUAGE:CXX>:-fvisibility-inlines-hidden>
)
  set_target_properties(${name} PROPERTIES POSITION_INDEPENDENT_CODE ON)
endfunction()

# Flavours in which test programs are built: patch sites from -pg -mfentry, from
# -fpatchable-function-entry=5, and none at all (plain).
set(DPROBE_FLAVOUR_fentry -pg -mfentry)
set(DPROBE_FLAVOUR_pfe -fpatchable-function-entry=5)
set(DPROBE_FLAVOUR_plain)
