/*
 * irqbench guest: everything whose exact instructions matter, in AT&T syntax.
 *
 * Register conventions of the measured code:
 *   %gs base  = this vCPU's VcpuSlot (set by the VMM), so handlers and ops reach their counters
 *               without a register;
 *   %ebp      = critical-section work (body_ops) while an op runs;
 *   an op clobbers %rax %rcx %rdx %rdi %rsi and keeps every other register.
 * Every op is `save; disable; body; restore; tail` (tail = ret, or the loop counter's dec where
 * a measured loop inlines it) with a global label at each site, so the VMM can attribute an
 * exit RIP to (strategy, site) through the ELF symbol table.
 *
 * Constants come from irqbench_abi as named global_asm! operands.
 */

    .section .text.entry, "ax"
    .global _start
    .type _start, @function
/* The VMM enters here in 64-bit mode: %rdi = vCPU index, %rsi = slot, %rsp = own stack, IF = 0. */
_start:
    cld
    call guest_main             /* never returns */
1:  cli
    hlt
    jmp 1b
    .size _start, . - _start

    .text

/* ---------------------------------------------------------------------------------------------
 * Exceptions: push a zero error code where the CPU pushes none, then the vector, and report.
 */
    .macro EXC_NOERR vec
    .global irqbench_exc_\vec
irqbench_exc_\vec:
    pushq $0
    pushq $\vec
    jmp irqbench_fault
    .endm
    .macro EXC_ERR vec
    .global irqbench_exc_\vec
irqbench_exc_\vec:
    pushq $\vec
    jmp irqbench_fault
    .endm

    EXC_NOERR 0
    EXC_NOERR 1
    EXC_NOERR 2
    EXC_NOERR 3
    EXC_NOERR 4
    EXC_NOERR 5
    EXC_NOERR 6
    EXC_NOERR 7
    EXC_ERR 8
    EXC_NOERR 9
    EXC_ERR 10
    EXC_ERR 11
    EXC_ERR 12
    EXC_ERR 13
    EXC_ERR 14
    EXC_NOERR 15
    EXC_NOERR 16
    EXC_ERR 17
    EXC_NOERR 18
    EXC_NOERR 19
    EXC_NOERR 20
    EXC_ERR 21
    EXC_NOERR 22
    EXC_NOERR 23
    EXC_NOERR 24
    EXC_NOERR 25
    EXC_NOERR 26
    EXC_NOERR 27
    EXC_NOERR 28
    EXC_ERR 29
    EXC_ERR 30
    EXC_NOERR 31

    .section .data
    .balign 8
    .global irqbench_exc_table
irqbench_exc_table:
    .irp n, 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31
    .quad irqbench_exc_\n
    .endr
    .text

/* Stack here: vector, error code, then the CPU's frame (rip, cs, rflags, rsp, ss). */
    .global irqbench_fault
irqbench_fault:
    cli
    popq %gs:{FAULT}+0          /* vector */
    popq %gs:{FAULT}+8          /* error code */
    pushq %rax
    movq 8(%rsp), %rax
    movq %rax, %gs:{FAULT}+16   /* faulting rip */
    movq 16(%rsp), %rax
    movq %rax, %gs:{FAULT}+24   /* cs */
    movq 24(%rsp), %rax
    movq %rax, %gs:{FAULT}+32   /* rflags */
    movq 32(%rsp), %rax
    movq %rax, %gs:{FAULT}+40   /* rsp */
    movq %cr2, %rax
    movq %rax, %gs:{FAULT}+48   /* cr2 (page faults) */
    movl %gs:{FAULT}, %eax
    movw ${PORT_FAULT}, %dx
    outl %eax, %dx              /* the VMM ends the run here; never resumes us */
1:  hlt
    jmp 1b

/* ---------------------------------------------------------------------------------------------
 * Interrupts: count them in the slot; those of the in-kernel LAPIC also need an EOI.
 *
 * LOG_LATENCY: log the interrupted RIP and, if its raise was timed (the slot's raise_tsc), how
 * long it waited, tagged with the running block (abi::latency). Only the handler swaps
 * raise_tsc back to 0.
 */
    .macro LOG_LATENCY
    pushq %rax
    pushq %rcx
    pushq %rdx
    xorl %ecx, %ecx
    xchgq %rcx, %gs:{RAISE_TSC}
    movabsq ${LATENCY_UNTIMED}, %rax      /* untimed */
    testq %rcx, %rcx
    jz 3f
    rdtsc
    shlq $32, %rdx
    orq %rdx, %rax
    subq %rcx, %rax             /* cycles from the raise to this handler */
    jae 2f
    xorl %eax, %eax             /* before the raise: the raiser's clock ran ahead */
2:  movabsq ${LATENCY_CYCLES_MAX} - 1, %rdx
    cmpq %rdx, %rax
    cmovaq %rdx, %rax           /* saturate below the untimed mark */
3:  movq %gs:{BLOCK_TAG}, %rdx
    shlq ${LATENCY_TAG_SHIFT}, %rdx
    orq %rdx, %rax
    movq %gs:{LATENCY_COUNT}, %rcx
    movq %rcx, %rdx
    andl ${LATENCY_LOG_MASK}, %edx
    movq %rax, %gs:{LATENCY_LOG}(,%rdx,8)
    movq 24(%rsp), %rax         /* the interrupted RIP, above the three pushes */
    movq %rax, %gs:{LATENCY_RIP}(,%rdx,8)
    incq %rcx
    movq %rcx, %gs:{LATENCY_COUNT}
    popq %rdx
    popq %rcx
    popq %rax
    .endm

    .global irqbench_irq_timer
irqbench_irq_timer:
    incq %gs:{INTERRUPTS}
    LOG_LATENCY
    pushq %rax
    movabsq ${LAPIC_EOI}, %rax
    movl $0, (%rax)             /* EOI: the in-kernel LAPIC delivers the next tick */
    popq %rax
    iretq

    .global irqbench_irq_msi
irqbench_irq_msi:
    incq %gs:{INTERRUPTS}
    LOG_LATENCY
    pushq %rax
    movabsq ${LAPIC_EOI}, %rax
    movl $0, (%rax)             /* EOI: clears the in-service bit that blocks the next MSI */
    popq %rax
    iretq

    .global irqbench_irq_ipi
irqbench_irq_ipi:
    incq %gs:{INTERRUPTS}
    LOG_LATENCY
    pushq %rax
    movabsq ${LAPIC_EOI}, %rax
    movl $0, (%rax)             /* EOI, as for an MSI */
    popq %rax
    iretq

    .global irqbench_irq_inject
irqbench_irq_inject:
    incq %gs:{INTERRUPTS}       /* userspace irqchip: no EOI to send */
    LOG_LATENCY
    iretq

    .global irqbench_irq_spurious
irqbench_irq_spurious:
    iretq

/* ---------------------------------------------------------------------------------------------
 * The critical section: body_ops rounds of one memory touch and one ALU op.
 */
    .macro BODY
    movl %ebp, %ecx
    testl %ecx, %ecx
    jz 2f
1:  incq %gs:{SCRATCH}          /* a store the section protects */
    addq %rcx, %rdx             /* an ALU op */
    decl %ecx
    jnz 1b
2:
    .endm

/* The epoll ready-list section: take the lock shared by all vCPUs, touch the list, drop it. */
    .macro LOCK_BODY
1:  movl $1, %ecx
    xchgl %ecx, {SHARED_LOCK}   /* atomic test-and-set */
    testl %ecx, %ecx
    jz 3f
2:  incq %gs:{LOCK_SPINS}       /* held by another vCPU: spin on a plain read */
    pause
    cmpl $0, {SHARED_LOCK}
    jne 2b
    jmp 1b
3:  incq %gs:{LOCK_ACQUISITIONS}
    movq {SHARED_LOCK_COUNTER}, %rcx
    incq %rcx                   /* load, add, store: loses updates unless the lock excludes */
    movq %rcx, {SHARED_LOCK_COUNTER}
    incq {SHARED_READY_LIST}    /* splice / requeue */
    movl $0, {SHARED_LOCK}      /* release: a plain store is enough on x86 (TSO) */
    .endm

/* Issue the virtual-IF hypercall through the transport chosen for the phase. Keeps all
 * registers. Two copies with their own symbols: irqbench_hypercall for the strategies' restore
 * paths, irqbench_hypercall_outer for the enclosing section's enable in nested phases, so that
 * the VMM can tell from the exit RIP which restore asked for delivery.
 * KVM hypercalls use the host CPU's own instruction (vmcall on Intel, vmmcall on AMD; the VMM
 * says which): executing the other one makes KVM rewrite it in guest memory
 * (x86.c emulator_fix_hypercall), i.e. change the code being measured. */
    .macro HYPERCALL_STUB name
    .global \name
\name:
    incq %gs:{HYPERCALLS}
    cmpl ${HC_PORT}, irqbench_hypercall_transport(%rip)
    jne 1f
    pushq %rax
    pushq %rdx
    xorl %eax, %eax
    movw ${PORT_HYPERCALL}, %dx
    outl %eax, %dx
    popq %rdx
    popq %rax
    ret
    /* KVM_HC_MAP_GPA_RANGE (12) is the one hypercall KVM_CAP_EXIT_HYPERCALL forwards to
     * userspace; its arguments (gpa 0, 1 page, no attributes) pass KVM's validity checks.
     * KVM_HC_VAPIC_POLL_IRQ (1) is handled inside KVM and ignores its arguments. */
1:  pushq %rax
    pushq %rbx
    pushq %rcx
    pushq %rdx
    movl ${KVM_HC_MAP_GPA_RANGE}, %eax
    cmpl ${HC_VAPIC_POLL}, irqbench_hypercall_transport(%rip)
    jne 2f
    movl ${KVM_HC_VAPIC_POLL_IRQ}, %eax
2:  xorl %ebx, %ebx
    movl $1, %ecx
    xorl %edx, %edx
    cmpl ${HC_INSN_VMMCALL}, irqbench_hypercall_insn(%rip)
    je 3f
    vmcall                      /* Intel VMX */
    jmp 4f
3:  vmmcall                     /* AMD SVM */
4:  cmpl ${HC_VAPIC_POLL}, irqbench_hypercall_transport(%rip)
    jne 5f
    movb $0, %gs:{VIF_PENDING}  /* KVM returned without the VMM: acknowledge the event here */
5:  popq %rdx
    popq %rcx
    popq %rbx
    popq %rax
    ret
    .global \name\()_end
\name\()_end:
    .endm

    HYPERCALL_STUB irqbench_hypercall
    HYPERCALL_STUB irqbench_hypercall_outer

/* ---------------------------------------------------------------------------------------------
 * The paravirt operation table, as arch/x86's pv_ops.irq: save_fl, restore_fl, irq_disable,
 * irq_enable, each a native implementation reached by an indirect call.
 */
    .section .data
    .balign 8
    .global irqbench_pv_irq_ops
irqbench_pv_irq_ops:
    .quad irqbench_pv_save_fl
    .quad irqbench_pv_restore_fl
    .quad irqbench_pv_irq_disable
    .quad irqbench_pv_irq_enable
    .global irqbench_hypercall_transport
irqbench_hypercall_transport:
    .long 0
    .global irqbench_hypercall_insn
irqbench_hypercall_insn:
    .long 0
    .text

    .global irqbench_pv_save_fl
irqbench_pv_save_fl:
    pushfq
    popq %rax
    ret
    .global irqbench_pv_restore_fl
irqbench_pv_restore_fl:
    pushq %rdi
    popfq                       /* may set IF: an interrupt window opens here */
    ret
    .global irqbench_pv_irq_disable
irqbench_pv_irq_disable:
    cli
    ret
    .global irqbench_pv_irq_enable
irqbench_pv_irq_enable:
    sti                         /* IF=1 after the next instruction */
    ret
    .global irqbench_pv_end
irqbench_pv_end:

/* ---------------------------------------------------------------------------------------------
 * The strategies (README's table). Each is defined twice: with the plain BODY (irq-flag
 * phases, prefix irqbench_op_) and with LOCK_BODY (lock phases, prefix irqbench_lockop_).
 * Sites: <name> = save, <name>_disable, <name>_body, <name>_restore, <name>_end.
 * A strategy is an OP_<NAME> macro here plus its entry in irqbench_abi::strategy::STRATEGIES
 * (the build checks that the two agree, and generates the instantiation and the tables).
 */
    .macro OP_EMPTY p, body, tail=ret
    .global \p\()_empty
\p\()_empty:
    .global \p\()_empty_body
\p\()_empty_body:
    \body
    .global \p\()_empty_restore
\p\()_empty_restore:
    \tail
    .global \p\()_empty_end
\p\()_empty_end:
    .endm

    .macro OP_NATIVE_POPF p, body, tail=ret
    .global \p\()_native_popf
\p\()_native_popf:
    pushfq                      /* save: flags = rflags */
    popq %rax
    .global \p\()_native_popf_disable
\p\()_native_popf_disable:
    cli
    .global \p\()_native_popf_body
\p\()_native_popf_body:
    \body
    .global \p\()_native_popf_restore
\p\()_native_popf_restore:
    pushq %rax                  /* restore: rflags = flags, IF included */
    popfq
    \tail
    .global \p\()_native_popf_end
\p\()_native_popf_end:
    .endm

    .macro OP_NATIVE_CLI_STI p, body, tail=ret
    .global \p\()_native_cli_sti
\p\()_native_cli_sti:           /* no save: spin_lock_irq assumes IRQs were on */
    .global \p\()_native_cli_sti_disable
\p\()_native_cli_sti_disable:
    cli
    .global \p\()_native_cli_sti_body
\p\()_native_cli_sti_body:
    \body
    .global \p\()_native_cli_sti_restore
\p\()_native_cli_sti_restore:
    sti                         /* unconditional: wrong when called with IRQs off */
    \tail
    .global \p\()_native_cli_sti_end
\p\()_native_cli_sti_end:
    .endm

    .macro OP_NATIVE_SKIP p, body, tail=ret
    .global \p\()_native_skip
\p\()_native_skip:
    pushfq
    popq %rax
    .global \p\()_native_skip_disable
\p\()_native_skip_disable:
    cli
    .global \p\()_native_skip_body
\p\()_native_skip_body:
    \body
    .global \p\()_native_skip_restore
\p\()_native_skip_restore:
    testl $0x200, %eax          /* X86_EFLAGS_IF in the saved flags? */
    jz 1f
    sti                         /* only then enable */
1:  \tail
    .global \p\()_native_skip_end
\p\()_native_skip_end:
    .endm

    .macro OP_PVOP_POPF p, body, tail=ret
    .global \p\()_pvop_popf
\p\()_pvop_popf:
    call *irqbench_pv_irq_ops+0(%rip)   /* save_fl */
    .global \p\()_pvop_popf_disable
\p\()_pvop_popf_disable:
    call *irqbench_pv_irq_ops+16(%rip)  /* irq_disable */
    .global \p\()_pvop_popf_body
\p\()_pvop_popf_body:
    \body
    .global \p\()_pvop_popf_restore
\p\()_pvop_popf_restore:
    movq %rax, %rdi
    call *irqbench_pv_irq_ops+8(%rip)   /* restore_fl(flags): popf */
    \tail
    .global \p\()_pvop_popf_end
\p\()_pvop_popf_end:
    .endm

    .macro OP_PVOP_SKIP p, body, tail=ret
    .global \p\()_pvop_skip
\p\()_pvop_skip:
    call *irqbench_pv_irq_ops+0(%rip)   /* save_fl */
    .global \p\()_pvop_skip_disable
\p\()_pvop_skip_disable:
    call *irqbench_pv_irq_ops+16(%rip)  /* irq_disable */
    .global \p\()_pvop_skip_body
\p\()_pvop_skip_body:
    \body
    .global \p\()_pvop_skip_restore
\p\()_pvop_skip_restore:
    testl $0x200, %eax                  /* the 2017 patch: if (flags & X86_EFLAGS_IF) */
    jz 1f
    call *irqbench_pv_irq_ops+24(%rip)  /* irq_enable */
1:  \tail
    .global \p\()_pvop_skip_end
\p\()_pvop_skip_end:
    .endm

    .macro OP_VIF_RESTORE p, body, tail=ret
    .global \p\()_vif_restore
\p\()_vif_restore:
    movzbl %gs:{VIF_MASK}, %eax         /* save: flags = mask (1 = IF clear) */
    .global \p\()_vif_restore_disable
\p\()_vif_restore_disable:
    movb $1, %gs:{VIF_MASK}
    .global \p\()_vif_restore_body
\p\()_vif_restore_body:
    \body
    .global \p\()_vif_restore_restore
\p\()_vif_restore_restore:
    movb %al, %gs:{VIF_MASK}            /* mask = !(flags & IF), written either way */
    testb %al, %al
    jnz 1f                              /* still masked: nothing to deliver */
    cmpb $0, %gs:{VIF_PENDING}
    je 1f
    call irqbench_hypercall             /* unmasked with an event pending */
1:  \tail
    .global \p\()_vif_restore_end
\p\()_vif_restore_end:
    .endm

    .macro OP_VIF_SKIP p, body, tail=ret
    .global \p\()_vif_skip
\p\()_vif_skip:
    movzbl %gs:{VIF_MASK}, %eax
    .global \p\()_vif_skip_disable
\p\()_vif_skip_disable:
    movb $1, %gs:{VIF_MASK}
    .global \p\()_vif_skip_body
\p\()_vif_skip_body:
    \body
    .global \p\()_vif_skip_restore
\p\()_vif_skip_restore:
    testb %al, %al                      /* only if (flags & IF), i.e. saved mask == 0 */
    jnz 1f
    movb $0, %gs:{VIF_MASK}
    cmpb $0, %gs:{VIF_PENDING}
    je 1f
    call irqbench_hypercall
1:  \tail
    .global \p\()_vif_skip_end
\p\()_vif_skip_end:
    .endm

/* ALL_OPS and OP_TABLE come from guest/build.rs, generated from irqbench_abi::strategy's table:
 * every strategy's OP_<NAME> macro above, and its entry point, in id order. */
    ALL_OPS irqbench_op, BODY
    ALL_OPS irqbench_lockop, LOCK_BODY

/* Indexed by strategy id (irqbench_abi::strategy). */
    .section .data
    .balign 8
    .global irqbench_ops
irqbench_ops:
    OP_TABLE irqbench_op
    .global irqbench_lockops
irqbench_lockops:
    OP_TABLE irqbench_lockop
    .text

/* ---------------------------------------------------------------------------------------------
 * The measured loops: each strategy's operation inlined into a loop of its own, as the kernel
 * inlines arch_local_irq_save/restore into its callers. A block's time is the loop's, and the
 * empty strategy's loop is subtracted as the baseline, so what the loop adds beside the
 * operation is noise in every net figure: on an emulating host (PVM) each instruction costs
 * about a microsecond and the block's noise grows with its length. A call through a register
 * and a `ret` per operation, and the body's zero test when body_ops is 0, made the baseline 7x
 * the smallest net; inlined, the loop adds the counter's `dec` after each operation and a `jnz`
 * per turn. The `dec` is also what runs in an `sti`'s shadow before the next operation's first
 * instruction, so an interrupt can be taken between two operations as in kernel code (with
 * `cli` right after `sti`, none ever could).
 *
 * Four kinds per strategy, each a table indexed by strategy id (guest/build.rs generates the
 * instantiation, ALL_LOOPS, and the tables, LOOP_TABLE):
 *   f / fb   flat (no nesting), the operation four times per turn (iterations a multiple of 4);
 *            fb with the critical-section BODY, f with none (body_ops = 0);
 *   n / nb   nested: Bresenham over nesting_per_65536 picks, per operation, a plain copy or one
 *            inside an enclosing section disabled and enabled as the strategy's family does
 *            (cli/sti, or the virtual-IF mask), and counts IF violations after the inner
 *            restore.
 * u64 irqbench_strategy_loop_<kind>_<name>(iterations, body_ops, nesting_per_65536) returns the
 * IF violations. Copies are labelled irqbench_op<kind><k>_<name>[_site] (k = copy), so an exit
 * RIP still resolves to (strategy, site).
 */
    .macro NOBODY
    .endm
    .macro NOTAIL
    .endm
    .macro DEC_COUNT
    decq %r12                   /* one operation done; in an sti's shadow */
    .endm

    .macro FLAT_LOOP stem, op, kind, body
    .global irqbench_strategy_loop_\kind\()_\stem
irqbench_strategy_loop_\kind\()_\stem:
    pushq %rbp
    pushq %r12
    movq %rdi, %r12             /* iterations: a multiple of 4 */
    movl %esi, %ebp             /* body_ops */
    testq %r12, %r12
    jz 9f
8:
    \op irqbench_op\kind\()0, \body, DEC_COUNT
    \op irqbench_op\kind\()1, \body, DEC_COUNT
    \op irqbench_op\kind\()2, \body, DEC_COUNT
    \op irqbench_op\kind\()3, \body, DEC_COUNT
    .global irqbench_strategy_loop_\kind\()_\stem\()_next
irqbench_strategy_loop_\kind\()_\stem\()_next:
    jnz 8b                      /* flags of the last copy's dec */
9:  xorl %eax, %eax             /* no nesting, no violations */
    popq %r12
    popq %rbp
    ret
    .global irqbench_strategy_loop_\kind\()_\stem\()_end
irqbench_strategy_loop_\kind\()_\stem\()_end:
    .endm

/* The enclosing section of a nested operation, per family. */
    .macro OUTER_DISABLE_cli
    cli
    .endm
    .macro OUTER_DISABLE_vif
    movb $1, %gs:{VIF_MASK}
    .endm
    .macro OUTER_CHECK_cli          /* must still be disabled after the inner restore */
    pushfq
    popq %rax
    testl $0x200, %eax
    jz 5f
    incq %rbx                   /* the inner restore enabled interrupts too early */
5:
    .endm
    .macro OUTER_CHECK_vif
    cmpb $0, %gs:{VIF_MASK}
    jne 5f
    incq %rbx
5:
    .endm
    .macro OUTER_ENABLE_cli
    sti
    .endm
    .macro OUTER_ENABLE_vif
    movb $0, %gs:{VIF_MASK}
    cmpb $0, %gs:{VIF_PENDING}
    je 6f
    call irqbench_hypercall_outer
6:
    .endm

    .macro NEST_LOOP stem, op, kind, body, family
    .global irqbench_strategy_loop_\kind\()_\stem
irqbench_strategy_loop_\kind\()_\stem:
    pushq %rbx
    pushq %rbp
    pushq %r12
    pushq %r13
    pushq %r14
    movq %rdi, %r12             /* iterations */
    movl %esi, %ebp             /* body_ops */
    /* Bresenham over nesting_per_65536, scaled to 2^32 so that the add's carry is the wrap
     * (one instruction fewer per operation than a compare): the same sequence of nested
     * operations. Nesting 1 (65536) does not scale; adding 2^32-1 to an accumulator that
     * starts there carries while it is >= 1, i.e. for the first 2^32-1 operations. */
    movl %edx, %r13d
    shll $16, %r13d
    xorl %r14d, %r14d
    cmpl $65536, %edx
    jb 4f
    movl $-1, %r13d
    movl $-1, %r14d
4:  xorl %ebx, %ebx             /* IF violations */
    testq %r12, %r12
    jz 9f
8:  addl %r13d, %r14d
    jc 7f                       /* wrapped: this operation is nested */
    \op irqbench_op\kind\()0, \body, DEC_COUNT
    .global irqbench_strategy_loop_\kind\()_\stem\()_next
irqbench_strategy_loop_\kind\()_\stem\()_next:
    jnz 8b
    jmp 9f
7:  OUTER_DISABLE_\family
    \op irqbench_op\kind\()1, \body, NOTAIL
    .global irqbench_strategy_loop_\kind\()_\stem\()_outer
irqbench_strategy_loop_\kind\()_\stem\()_outer:
    OUTER_CHECK_\family
    OUTER_ENABLE_\family
    decq %r12
    jnz 8b
9:  movq %rbx, %rax
    popq %r14
    popq %r13
    popq %r12
    popq %rbp
    popq %rbx
    ret
    .global irqbench_strategy_loop_\kind\()_\stem\()_end
irqbench_strategy_loop_\kind\()_\stem\()_end:
    .endm

    ALL_LOOPS

    .section .data
    .balign 8
    .global irqbench_loops_f
irqbench_loops_f:
    LOOP_TABLE f
    .global irqbench_loops_fb
irqbench_loops_fb:
    LOOP_TABLE fb
    .global irqbench_loops_n
irqbench_loops_n:
    LOOP_TABLE n
    .global irqbench_loops_nb
irqbench_loops_nb:
    LOOP_TABLE nb
    .text

/* void irqbench_lock_loop(lockop, iterations, body_ops): the ready-list scan pattern. */
    .global irqbench_lock_loop
irqbench_lock_loop:
    pushq %rbx
    pushq %rbp
    pushq %r12
    movq %rdi, %rbx
    movq %rsi, %r12
    movl %edx, %ebp
.Llock_round:                   /* named labels: BODY has its own 1: and 2: */
    testq %r12, %r12
    jz .Llock_done
    call *%rbx                  /* lock, splice, unlock */
    BODY                        /* work outside the lock */
    call *%rbx                  /* lock, requeue, unlock */
    decq %r12
    jmp .Llock_round
.Llock_done:
    popq %r12
    popq %rbp
    popq %rbx
    ret

/* u64 irqbench_op_once(op, body_ops): one operation, for the mixed workload. */
    .global irqbench_op_once
irqbench_op_once:
    pushq %rbp
    movl %esi, %ebp
    call *%rdi
    popq %rbp
    ret

/* ---------------------------------------------------------------------------------------------
 * The instruction-cost suite: each function irqbench_insn_<name> runs its instruction
 * abi::insn::unroll(id) times; a probe is its function here plus its entry in abi::insn::INSNS.
 * void irqbench_insn_loop(fn, iterations); %rdi/%rsi inside = rflags with IF set / clear.
 */
    .global irqbench_insn_loop
irqbench_insn_loop:
    pushq %rbx
    pushq %r12
    movq %rdi, %rbx
    movq %rsi, %r12
    pushfq
    popq %rdi
    orq $0x200, %rdi            /* rflags with IF=1 */
    movq %rdi, %rsi
    andq $~0x200, %rsi          /* rflags with IF=0 */
1:  testq %r12, %r12
    jz 2f
    call *%rbx
    decq %r12
    jmp 1b
2:  popq %r12
    popq %rbx
    sti
    ret

    .macro REPEAT8 a:vararg
    \a
    \a
    \a
    \a
    \a
    \a
    \a
    \a
    .endm

    .macro POPF_SET_IF
    cli
    pushq %rdi
    popfq
    .endm
    .macro POPF_CLEAR_IF
    sti
    pushq %rsi
    popfq
    .endm
    .macro POPF_SAME_IF
    pushq %rdi
    popfq
    .endm
    .macro PUSHF_POP
    pushfq
    popq %rax
    .endm

    .global irqbench_insn_empty
irqbench_insn_empty:
    ret
    .global irqbench_insn_cli
irqbench_insn_cli:
    REPEAT8 cli
    ret
    .global irqbench_insn_sti
irqbench_insn_sti:
    REPEAT8 sti
    ret
    .global irqbench_insn_popf_set_if
irqbench_insn_popf_set_if:      /* each: IF 0 -> 1 (the cli is the one that makes it 0) */
    REPEAT8 POPF_SET_IF
    ret
    .global irqbench_insn_popf_clear_if
irqbench_insn_popf_clear_if:    /* each: IF 1 -> 0 (the sti makes it 1) */
    REPEAT8 POPF_CLEAR_IF
    ret
    .global irqbench_insn_popf_same_if
irqbench_insn_popf_same_if:     /* IF 1 -> 1 */
    sti
    REPEAT8 POPF_SAME_IF
    ret
    .global irqbench_insn_pushf
irqbench_insn_pushf:
    REPEAT8 PUSHF_POP
    ret
    .global irqbench_insn_pio_exit
irqbench_insn_pio_exit:
    movw ${PORT_EXIT_PROBE}, %dx
    outl %eax, %dx              /* one userspace port-I/O exit */
    ret
    .global irqbench_insn_mmio_exit
irqbench_insn_mmio_exit:
    movabsq ${MMIO_PROBE}, %rax
    movl $0, (%rax)             /* one userspace MMIO exit */
    ret
    .global irqbench_insn_cpuid
irqbench_insn_cpuid:
    pushq %rbx                  /* cpuid writes %ebx, which the loop keeps */
    xorl %eax, %eax
    xorl %ecx, %ecx
    cpuid
    popq %rbx
    ret
    .global irqbench_insn_hlt_exit
irqbench_insn_hlt_exit:
    sti
    hlt                         /* one KVM_EXIT_HLT to the VMM (userspace irqchip) */
    ret
    .global irqbench_insn_end
irqbench_insn_end:

    .section .data
    .balign 8
    .global irqbench_insns
irqbench_insns:                 /* indexed by instruction id (generated from irqbench_abi::insn) */
    INSN_TABLE
    .text
