package workflows

import "go.temporal.io/sdk/workflow"

// The claim workflow's versions: the one home of this table. docs/design.md
// and docs/reliability.md link here rather than repeating it.

// versionClaim is the claim workflow's change ID for workflow.GetVersion,
// read once, right after intake. Each version is a change to the command
// sequence; runs recorded under an older one replay as they ran:
//
//	DefaultVersion  one triage call; decisions name their approver
//	versionAgent    triage is the agent loop
//	versionTrusted  the worker's policy (recorded at intake) rules the run and the
//	                input may only tighten it; decisions need signed receipts;
//	                four eyes above the threshold
//	versionReview   deterministic review rules (fraud flags and score, prior
//	                claims, exclusion words) send a claim to a human whatever
//	                the model says
//	versionRecords  the close and the audit record run local (plan.record):
//	                keyed writes to the system of record whose repeat returns
//	                the first result, so one workflow task ends the claim
//	versionAuthority receipts name their namespace and insurer deployment
//	                (their audience); conflicts of interest compare people,
//	                not spellings (canonical e-mail addresses, the directory's
//	                other addresses and payout accounts)
//	versionDecided  what the task that ends an approval wait decided is
//	                recorded before a record embeds it: after a rejection,
//	                an expiry or a withdrawal the claimant's e-mail runs as a
//	                regular activity (checkpoint.go, waited)
//	versionRecheck  a claim withdrawn or amended while it waits is read
//	                again at once (the changed signal claimsctl sends)
//	                rather than after the next decision or the deadline
//	versionDeadLetterFile a dead-lettered run writes its audit record and
//	                claim file too (one local activity, after the dead
//	                letter is decided), so a claim stopped for good is on
//	                record like one that ended
//	versionQueue    each change of an approval wait (opened, a vote or a
//	                hand-off that leaves it open, escalated, ended) is
//	                written to the approval queue by a local activity
//	                (PublishApproval), which the inbox lists from
//	versionBudget   a model step that finds no capacity in time (the shared
//	                model budget, a provider's 429) hands the wait back: the
//	                run waits on a durable timer and runs the step again,
//	                the wait counted against neither the step's retries nor
//	                the step cap (checkpoint.go, exec)
//	versionProvenance every decision names what made it: the build that
//	                decided (the build history records for the workflow task),
//	                the policy version intake recorded and the model answers
//	                it rests on (Decided; decisions and attempts through
//	                approvals.Gate.Stamp), and model_calls name each answer's
//	                build and prompt version. A decision the rules make (the
//	                auto-approve limit, a rejection by coverage or assessment)
//	                is pending like a person's (versionDecided): after a
//	                rejection by the rules the claimant's e-mail runs as a
//	                regular activity and records the task that decided before
//	                the audit record names its build
//	versionLocalNotices the reminder and the escalation notice of a wait are
//	                costly steps (plan.notice) rather than regular
//	                activities: after the wait's timer fired nothing is
//	                pending, so each runs local in the workflow task the timer
//	                woke, beside the queue write, and an escalation costs the
//	                server one workflow task instead of two and an activity
//	                task (checkpoint.go); a notice whose quick local attempts
//	                fail is sent as a regular activity
//	versionLaw      where intake recorded a jurisdiction's rules (law.go):
//	                the acknowledgment and status letters while a claim
//	                waits (SendLetter, on durable timers in a goroutine), the
//	                decision letter as the claimant's e-mail, the wait's
//	                deadlines inside the decision clock, an unanswered wait
//	                held for the supervisors (an overdue notice, never a
//	                denial by silence), a model's "pay nothing" decided by
//	                a person, and the clocks judged in the audit record
//	versionOutage   a step whose dependency is down (the model provider,
//	                Stripe: DependencyDown after its first attempts) waits
//	                on durable timers, 30 s doubling to 5 min, and runs
//	                again, for up to a day, instead of burning its retries
//	                and dead-lettering the claim (checkpoint.go, exec); the
//	                status query says what it waits on and since when
//	versionOutageGrid after its first four waits such a step waits on the
//	                grid every waiting claim shares, the longest waiting
//	                first in each tick (checkpoint.go, outageWake); the
//	                day's bound counts from when the step began to wait
//	versionQueueBeside the approval queue's write at the end of a wait an
//	                approval ended runs beside the claim's re-read
//	                (approvalRounds): the task that schedules the payment
//	                waits for the slower of two store round trips, not for
//	                both one after the other
//	versionFreeAssess when the triage's answers were free to ask for again
//	                (the rules model), the assessment is a costly step
//	                (plan.freeModel): local in the workflow task that
//	                schedules the payment, whose completion records it, where
//	                it was a regular activity of its own; a model that costs
//	                to ask again still assesses in a regular activity. A dead
//	                letter in a task that ran local steps files its claim
//	                file in the regular form, after them (fileDeadLetter)
//
// (The ID keeps the name it was introduced under.)
const versionClaim = "triage-agent"

const (
	versionAgent   = 1
	versionTrusted = 2
	versionReview  = 3
	versionRecords = 4
	// versionAuthority's changes decide which decisions count, not which
	// commands a run issues; they are versioned all the same, so that a run
	// decides on replay exactly as it did (an accepted decision accepted
	// again, a refused one refused).
	versionAuthority      = 5
	versionDecided        = 6
	versionRecheck        = 7
	versionDeadLetterFile = 8
	versionQueue          = 9
	versionBudget         = 10
	versionProvenance     = 11
	versionLocalNotices   = 12
	versionLaw            = 13
	versionOutage         = 14
	versionOutageGrid     = 15
	versionQueueBeside    = 16
	versionFreeAssess     = 17

	// versionLatest is what new runs record.
	versionLatest = versionFreeAssess
)

// versionSwitches are what a run does by the version it recorded: one
// table, set once at intake (admitIntake) and read where each change is
// made. A run before intake has read its version has none of them.
type versionSwitches struct {
	agent          bool // versionAgent: triage is the agent loop
	trusted        bool // versionTrusted: the worker's policy, signed receipts
	review         bool // versionReview: the deterministic review rules
	localRecords   bool // versionRecords: the close and the audit run local (plan.record)
	authority      bool // versionAuthority: receipts name their audience; people, not spellings
	decided        bool // versionDecided: what ends a wait is pending until recorded
	recheck        bool // versionRecheck: the changed signal reads the claim again
	deadLetterFile bool // versionDeadLetterFile: a dead letter writes its record and claim file
	queue          bool // versionQueue: each change of a wait goes to the approval queue
	budgetWaits    bool // versionBudget: a model step out of capacity waits on a durable timer
	provenance     bool // versionProvenance: decisions and model calls name what made them
	localNotices   bool // versionLocalNotices: the reminder and escalation run as plan.notice
	law            bool // versionLaw: a jurisdiction's clocks, letters and hold
	outageWaits    bool // versionOutage: a step whose dependency is down waits on durable timers
	outageGrid     bool // versionOutageGrid: the long waits share a grid, the longest waiting first
	queueBeside    bool // versionQueueBeside: a wait's end goes to the queue beside the re-read
	freeAssess     bool // versionFreeAssess: after free triage answers the assessment is costly, not regular
}

// switchesOf is the table: which changes a run of version v has.
func switchesOf(v workflow.Version) versionSwitches {
	return versionSwitches{
		agent:          v >= versionAgent,
		trusted:        v >= versionTrusted,
		review:         v >= versionReview,
		localRecords:   v >= versionRecords,
		authority:      v >= versionAuthority,
		decided:        v >= versionDecided,
		recheck:        v >= versionRecheck,
		deadLetterFile: v >= versionDeadLetterFile,
		queue:          v >= versionQueue,
		budgetWaits:    v >= versionBudget,
		provenance:     v >= versionProvenance,
		localNotices:   v >= versionLocalNotices,
		law:            v >= versionLaw,
		outageWaits:    v >= versionOutage,
		outageGrid:     v >= versionOutageGrid,
		queueBeside:    v >= versionQueueBeside,
		freeAssess:     v >= versionFreeAssess,
	}
}
